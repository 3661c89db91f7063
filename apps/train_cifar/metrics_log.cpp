#include "apps/train_cifar/metrics_log.h"

#include "apps/common/output_paths.h"
#include "engine/error.h"

namespace tandem::apps {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path), append_(append) {
  if (path.empty()) return;
  check_output_path("train_cifar", "--log-json", path);
  lock_ = std::make_unique<OutputLock>("train_cifar", "--log-json", path);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (path_.empty()) return;
  if (!out_.is_open()) {
    out_.open(path_, append_ ? std::ios::app : std::ios::trunc);
    TANDEM_CHECK(out_.good(), "[train_cifar] cannot write the metrics log ", path_);
  }
  out_ << record.dump() << '\n';
  out_.flush();
  TANDEM_CHECK(out_.good(), "[train_cifar] writing the metrics log ", path_, " failed");
}

}  // namespace tandem::apps
