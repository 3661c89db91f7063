#pragma once
/// The first messages on every connection to a StoreServer: the client says hello, and, where the
/// job has a secret, each side proves it knows it without sending it (internal to parallel/).
///
/// Note [Store handshake]: a job's secret (TANDEM_JOB_TOKEN, or one tandem-run and
/// train_cifar --nproc make for a one-machine job) is never sent. The client's Hello carries a
/// random nonce c; the server answers with its own nonce s and HMAC-SHA256(secret, "server" c s);
/// the client checks it (a store of another job, or a stranger's, is named as such) and answers
/// HMAC-SHA256(secret, "client" s c), which the server compares in constant time. Only then is any
/// key read or written; a client that fails, or says anything else first, is closed. The labels
/// keep one side's proof from being replayed as the other's, the fresh nonces keep a recorded
/// exchange from being replayed at all. Without a secret the Hello alone proves the client speaks
/// the protocol. This authenticates the connection's start only: the requests after it are not
/// signed or encrypted (no TLS: Note [No TLS] in docs/reliability.md's Security section).
///
///   Hello  u8 6, bytes c, u8 has_secret   -> Ok bytes s, u8 has_secret, bytes server_proof
///                                           | Failed message
///   Prove  u8 7, bytes client_proof       -> Ok | Failed message

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::parallel::auth {

inline constexpr uint8_t kHello = 6;
inline constexpr uint8_t kProve = 7;
inline constexpr size_t kNonceBytes = 32;

/// Cryptographically random bytes (OpenSSL's RAND_bytes).
std::string random_bytes(size_t n);
/// Initialises OpenSSL on the calling thread; a StoreServer calls it before its loop thread
/// starts (Note [OpenSSL before the loop] in store_auth.cpp).
void initialise_openssl();
/// A new secret for one job: 64 hexadecimal digits (what `openssl rand -hex 32` prints).
std::string new_job_token();
/// HMAC-SHA256(secret, label || a || b), 32 bytes.
std::string proof(std::string_view secret, std::string_view label, std::string_view a,
                  std::string_view b);
/// Compares two proofs in constant time.
bool same_proof(std::string_view a, std::string_view b);

/// The variable that carries a job's secret to its processes.
inline constexpr const char* kTokenVariable = "TANDEM_JOB_TOKEN";

/// Throws one line for a token too short to resist guessing: the server's proof is an HMAC over
/// nonces anyone may choose, so a short token could be searched offline. Empty means none.
void check_token(const std::string& token);

/// TANDEM_JOB_TOKEN from the environment, or "".
std::string token_from_environment();

}  // namespace tandem::parallel::auth
