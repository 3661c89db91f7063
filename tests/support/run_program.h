#pragma once
/// Running one of Tandem's programs as a user would (a child process through the shell), for the
/// tests of apps/: what it printed and how it exited.

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tandem::testing {

struct ProgramRun {
  int exit_code = -1;  ///< the exit status, or 128 + the signal that ended it
  std::string output;  ///< stdout (and stderr when merged)
  std::string errors;  ///< stderr when not merged
};

/// `arg` quoted for /bin/sh.
inline std::string shell_quoted(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

/// Runs `program args...`; stderr goes into output (merge) or into `errors` through the file
/// `stderr_path`.
inline ProgramRun run_program(const std::string& program, const std::vector<std::string>& args,
                              bool merge = true, const std::string& stderr_path = "") {
  std::string command = shell_quoted(program);
  for (const std::string& arg : args) {
    command += ' ';  // appends: GCC 12 warns falsely (-Wrestrict) about " " + std::string
    command += shell_quoted(arg);
  }
  command += " 2>";
  command += merge ? "&1" : shell_quoted(stderr_path);
  ProgramRun run;
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!merge) {
    std::ifstream in(stderr_path);
    std::stringstream text;
    text << in.rdbuf();
    run.errors = text.str();
  }
  return run;
}

}  // namespace tandem::testing
