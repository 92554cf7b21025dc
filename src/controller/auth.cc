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

Result<api::TokenRecord> Authenticator::Check(std::string_view token, Time now) {
  if (token.empty() || token.size() > 256) return Status::NotFound("missing or malformed token");
  std::string hash = Sha256Hex(token);
  std::optional<api::TokenRecord> rec;
  {
    MutexLock lock(mu_);
    auto it = cache_.find(hash);
    if (it != cache_.end()) rec = it->second;
  }
  if (!rec) {
    GF_ASSIGN_OR_RETURN(auto found, store_.FindToken(hash));
    if (!found) return Status::NotFound("unknown token");
    rec = *found;
    MutexLock lock(mu_);
    cache_[hash] = *rec;
  }
  if (rec->revoked) return Status::NotFound("the token was revoked");
  if (rec->expires && now >= *rec->expires) return Status::NotFound("the token expired at " + FormatIso8601(*rec->expires));
  if (!rec->last_used || now - *rec->last_used >= Duration::Seconds(60)) {
    // Once a minute: read the stored record afresh (a revocation made elsewhere, e.g. by a node's
    // re-registration, shows here) and record the use on it.
    GF_ASSIGN_OR_RETURN(auto fresh, store_.FindToken(hash));
    if (!fresh) return Status::NotFound("unknown token");
    fresh->last_used = now;
    {
      MutexLock lock(mu_);
      cache_[hash] = *fresh;
    }
    if (fresh->revoked) return Status::NotFound("the token was revoked");
    // Best effort: a failed write only leaves the last-used time older.
    (void)store_.TouchToken(hash, now);
    return *fresh;
  }
  return *rec;
}

Status Authenticator::Revoke(const std::string& hash) {
  GF_ASSIGN_OR_RETURN(auto found, store_.FindToken(hash));
  if (!found) return Status::NotFound("no token " + hash.substr(0, 12));
  found->revoked = true;
  GF_RETURN_IF_ERROR(store_.PutToken(*found));
  MutexLock lock(mu_);
  cache_[hash] = *found;
  return Status::Ok();
}

Result<std::string> Authenticator::Create(api::TokenKind kind, std::string subject, std::string role,
                                          std::string team, Time now, std::optional<Time> expires,
                                          std::optional<api::AuditRecord> audit, std::string made_by) {
  std::string secret = NewToken(kind);
  api::TokenRecord rec;
  rec.hash = Sha256Hex(secret);
  if (audit) {
    audit->object = "token " + rec.hash.substr(0, 12);
    store_.AttachAudit({std::move(*audit)});
  }
  rec.kind = kind;
  rec.subject = std::move(subject);
  rec.role = std::move(role);
  rec.team = std::move(team);
  rec.created = now;
  rec.expires = expires;
  rec.made_by = std::move(made_by);
  GF_RETURN_IF_ERROR(store_.PutToken(rec));
  MutexLock lock(mu_);
  cache_[rec.hash] = rec;
  return secret;
}

}  // namespace gpufleet::controller
