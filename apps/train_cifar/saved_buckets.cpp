#include "apps/train_cifar/saved_buckets.h"

#include <charconv>

#include "engine/error.h"
#include "parallel/distributed_data_parallel.h"

namespace tandem::apps {
namespace {

constexpr const char* kKey = "ddp_bucket_order";

std::vector<size_t> parse_order(const std::string& text, const std::string& path) {
  std::vector<size_t> order;
  const char* at = text.data();
  const char* end = text.data() + text.size();
  while (at < end) {
    size_t index = 0;
    const auto [next, error] = std::from_chars(at, end, index);
    TANDEM_CHECK(error == std::errc() && (next == end || *next == ','), "[train_cifar] ", path,
                 " has a malformed '", kKey, "': '", text, "'");
    order.push_back(index);
    at = next == end ? end : next + 1;
  }
  return order;
}

}  // namespace

void record_bucket_order(const TrainingSetup& setup, nn::Metadata& extra) {
  if (setup.ddp == nullptr) return;
  const std::vector<size_t> order = setup.ddp->reducer().bucket_order();
  if (order.empty()) return;
  std::string text;
  for (size_t index : order) {
    if (!text.empty()) text += ',';
    text += std::to_string(index);
  }
  extra[kKey] = text;
}

void restore_bucket_order(const nn::Metadata& saved, const TrainingSetup& setup,
                          const std::string& path) {
  const auto found = saved.find(kKey);
  if (setup.ddp == nullptr || found == saved.end()) return;
  setup.ddp->reducer().restore_bucket_order(parse_order(found->second, path));
}

}  // namespace tandem::apps
