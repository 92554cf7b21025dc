#include "controller/auth.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

namespace gpufleet::controller {

namespace {
std::string Hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}
}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return Hex(md, len);
}

std::string NewToken(api::TokenKind kind) {
  unsigned char buf[16];
  if (RAND_bytes(buf, sizeof buf) != 1) {
    // RAND_bytes fails only when the OS has no entropy source; refuse to make a weak token.
    std::abort();
  }
  return std::string("gf_") + api::TokenKindName(kind) + "_" + Hex(buf, sizeof buf);
}

Result<api::TokenRecord> Authenticator::Check(std::string_view token) {
  if (token.empty() || token.size() > 256) return Status::NotFound("missing or malformed token");
  std::string hash = Sha256Hex(token);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(hash);
    if (it != cache_.end()) {
      if (it->second.revoked) return Status::NotFound("the token was revoked");
      return it->second;
    }
  }
  GF_ASSIGN_OR_RETURN(auto rec, store_.FindToken(hash));
  if (!rec) return Status::NotFound("unknown token");
  std::lock_guard<std::mutex> lock(mu_);
  cache_[hash] = *rec;
  if (rec->revoked) return Status::NotFound("the token was revoked");
  return *rec;
}

Result<std::string> Authenticator::Create(api::TokenKind kind, std::string subject, std::string role,
                                          std::string team, Time now) {
  std::string secret = NewToken(kind);
  api::TokenRecord rec;
  rec.hash = Sha256Hex(secret);
  rec.kind = kind;
  rec.subject = std::move(subject);
  rec.role = std::move(role);
  rec.team = std::move(team);
  rec.created = now;
  GF_RETURN_IF_ERROR(store_.PutToken(rec));
  std::lock_guard<std::mutex> lock(mu_);
  cache_[rec.hash] = rec;
  return secret;
}

}  // namespace gpufleet::controller
