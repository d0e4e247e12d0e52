#pragma once
// Where Tessel's own files are at run time: next to the shared library this code is in, so
// the same lookup works in the build tree and in an installed prefix (CMake puts libtessel,
// the runtime archive and, in the build tree, the runner in one directory; an install puts
// the runner in the prefix's bin).
#include <string>

namespace tessel {

// The directory of the libtessel that contains this code.
std::string library_dir();
// The runtime archive that exported kernels link (libtessel_runtime.a).
std::string runtime_archive();
// The tessel-runner program ($TESSEL_RUNNER when set).
std::string runner_program();

}  // namespace tessel
