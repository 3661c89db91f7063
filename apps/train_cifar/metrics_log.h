#pragma once
/// The JSON-lines metrics log (--log-json): one JSON object per line, flushed as written, so a
/// plot can follow a running job and a killed job keeps every finished epoch.

#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/common/output_lock.h"

namespace tandem::apps {

/// How a run opens its log (Note [Logs are outputs too] in metrics_log.cpp).
enum class LogOpening {
  Create,   ///< a new run: a log that already holds records is another run's, and refused
  Append,   ///< a resumed run continues its own log, so one file holds the whole run
  Replace,  ///< --overwrite, or --resume auto starting afresh: the log is this job's to replace
};

class MetricsLog {
 public:
  /// An empty path logs nothing. The path is checked and locked here (Note [One writer per
  /// output]), but opened at the first record: a run refused before its first step leaves the
  /// log there as it was.
  MetricsLog(const std::string& path, LogOpening opening);
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  LogOpening opening_ = LogOpening::Create;
  std::unique_ptr<OutputLock> lock_;
  std::ofstream out_;
};

}  // namespace tandem::apps
