#pragma once
/** \file What the tuner's processes (build and measure workers, GPU runners) share to talk
 * over pipes: whole writes, one-line messages, and elapsed wall time. */
#include <unistd.h>

#include <chrono>
#include <string>

namespace tessel::autotune {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Writes all of `s` (a closed pipe ends it early: the reader's EOF tells the rest).
inline void write_all(int fd, const std::string& s) {
  for (size_t off = 0; off < s.size();) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += size_t(n);
  }
}

// An error message as one protocol line: newlines flattened, at most 2000 characters.
inline std::string one_line(const std::string& message) {
  std::string s = message.substr(0, 2000);
  for (auto& c : s)
    if (c == '\n') c = ' ';
  return s;
}

}  // namespace tessel::autotune
