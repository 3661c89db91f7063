#pragma once
/// The JSON-lines metrics log (--log-json): one JSON object per line, flushed as written, so a
/// plot can follow a running job and a killed job keeps every finished epoch.

#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/common/output_lock.h"

namespace tandem::apps {

class MetricsLog {
 public:
  /// An empty path logs nothing. Appends when resuming, so one file holds the whole run. The
  /// path is checked and locked here (Note [One writer per output]), but opened at the first
  /// record: a run refused before its first step leaves the log there as it was.
  MetricsLog(const std::string& path, bool append);
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  bool append_ = false;
  std::unique_ptr<OutputLock> lock_;
  std::ofstream out_;
};

}  // namespace tandem::apps
