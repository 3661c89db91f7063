#include "parallel/comm/rendezvous/store_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "engine/error.h"

namespace tandem::parallel::auth {

std::string random_bytes(size_t n) {
  std::string bytes(n, '\0');
  TANDEM_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(n)) == 1,
               "[store] OpenSSL could not produce random bytes");
  return bytes;
}

// Note [OpenSSL before the loop]: OpenSSL registers its exit-time cleanup (atexit) when first
// initialised, and once that cleanup has run, a thread that ends no longer frees the state
// OpenSSL keeps for it (error queue, random generator). Initialised first by a server's loop
// thread, the cleanup is registered after the server was built, so it runs before a server that
// lives until exit (a static one: the store_session fuzz target's) is destroyed, and
// LeakSanitizer reports the loop thread's state, 11 KB. Initialised here, by the server's
// constructor, it runs after. (Options 0 would return at once without registering anything;
// loading the configuration is what RAND_bytes' first call does anyway.)
void initialise_openssl() {
  TANDEM_CHECK(OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, nullptr) == 1,
               "[store] OpenSSL could not be initialised");
}

std::string new_job_token() {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string token;
  for (const char c : random_bytes(32)) {
    token.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    token.push_back(kDigits[static_cast<uint8_t>(c) & 15]);
  }
  return token;
}

std::string proof(std::string_view secret, std::string_view label, std::string_view a,
                  std::string_view b) {
  const std::string message = std::string(label) + std::string(a) + std::string(b);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  TANDEM_CHECK(HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                    reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
                    &length) != nullptr,
               "[store] OpenSSL's HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(digest), length);
}

void check_token(const std::string& token) {
  TANDEM_CHECK(token.empty() || token.size() >= 16, "[store] ", kTokenVariable, " has ",
               token.size(),
               " characters; a job token needs at least 16 (make one with "
               "`openssl rand -hex 32`)");
}

std::string token_from_environment() {
  const char* value = std::getenv(kTokenVariable);
  return value == nullptr ? "" : value;
}

bool same_proof(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tandem::parallel::auth
