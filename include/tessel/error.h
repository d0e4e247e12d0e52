#pragma once
// Two kinds of failure, kept apart on purpose:
//  - tessel::Error: the user asked for something illegal (bad schedule, shape, option,
//    log line). The message names the stage, axis and rule, and the legal alternatives.
//  - tessel::InternalError: an invariant of the compiler broke. That is our bug.
#include <sstream>
#include <stdexcept>
#include <string>

namespace tessel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& msg)
      : std::logic_error("internal error (this is a bug in Tessel, please report it): " + msg) {}
};

namespace detail {
// Builds a message from any streamable pieces; only runs when a check fails.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace tessel

#define TESSEL_USER_CHECK(cond, ...) \
  do { if (!(cond)) throw ::tessel::Error(::tessel::detail::cat(__VA_ARGS__)); } while (0)

#define TESSEL_INTERNAL_CHECK(cond, ...)                                              \
  do {                                                                                \
    if (!(cond))                                                                      \
      throw ::tessel::InternalError(::tessel::detail::cat(__FILE__, ":", __LINE__, ": ", \
                                                          #cond, ": ", __VA_ARGS__)); \
  } while (0)
