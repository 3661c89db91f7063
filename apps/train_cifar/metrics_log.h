#pragma once
/// The JSON-lines metrics log (--log-json): one JSON object per line, flushed as written, so a
/// plot can follow a running job and a killed job keeps every finished epoch.

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::apps {

class MetricsLog {
 public:
  /// An empty path logs nothing. Appends when resuming, so one file holds the whole run.
  MetricsLog(const std::string& path, bool append);
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace tandem::apps
