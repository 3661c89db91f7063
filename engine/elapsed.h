#pragma once
// Elapsed time as the plain numbers that timings and reports print: milliseconds between two
// points of the steady clock, milliseconds or seconds since one.
#include <chrono>

namespace tandem {

inline double milliseconds_between(std::chrono::steady_clock::time_point from,
                                   std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return milliseconds_between(start, std::chrono::steady_clock::now());
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return milliseconds_since(start) / 1000.0;
}

}  // namespace tandem
