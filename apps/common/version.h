#pragma once
/// What `--version` prints: Tandem's version and the commit it was configured from.

namespace tandem::apps {

/// "0.1.0 (commit 1a2b3c4)"; "(commit unknown)" outside a git checkout. CMake reads the commit
/// when it configures (apps/CMakeLists.txt), so a build that did not reconfigure keeps the older.
const char* tandem_version();

}  // namespace tandem::apps
