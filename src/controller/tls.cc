#include "controller/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>

#include "common/strings.h"

namespace gpufleet::controller {

namespace {

namespace fs = std::filesystem;

// The oldest error on OpenSSL's queue, in words; the queue is emptied.
std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  std::string out = "unknown error";
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out = buf;
  }
  ERR_clear_error();
  return out;
}

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

Result<X509Ptr> ReadCertificate(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return Status::NotFound(path + ": cannot open");
  X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (x == nullptr) return Status::InvalidArgument(path + ": not a PEM certificate (" + OpenSslError() + ")");
  return X509Ptr(x);
}

Result<KeyPtr> ReadKey(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return Status::NotFound(path + ": cannot open");
  EVP_PKEY* k = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (k == nullptr) return Status::InvalidArgument(path + ": not a PEM private key (" + OpenSslError() + ")");
  return KeyPtr(k);
}

// Writes through a temporary file and a rename, with `mode` from the start (keys: 0600).
template <typename Write>
Status WritePem(const std::string& path, mode_t mode, Write write) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Unavailable("cannot write " + tmp);
  FILE* f = ::fdopen(fd, "w");
  if (f == nullptr) {
    ::close(fd);
    return Status::Unavailable("cannot write " + tmp);
  }
  bool ok = write(f) == 1;
  ok = (std::fflush(f) == 0) && ok && ::fsync(fd) == 0;
  std::fclose(f);
  if (!ok) return Status::Unavailable("cannot write " + tmp + ": " + OpenSslError());
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::Unavailable("cannot replace " + path + ": " + ec.message());
  return Status::Ok();
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Status::Internal("certificate extension " + value + ": " + OpenSslError());
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return Status::Internal("certificate extension " + value + ": " + OpenSslError());
  return Status::Ok();
}

// A certificate for `key`, valid from an hour ago for `days`, named `cn`, signed by `issuer_key`
// (self-signed when `issuer` is null).
Result<X509Ptr> MakeCertificate(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key,
                                long days) {
  X509Ptr cert(X509_new());
  if (!cert) return Status::Internal("X509_new: " + OpenSslError());
  X509_set_version(cert.get(), 2);
  BIGNUM* serial = BN_new();
  BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("gpufleet"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509_set_pubkey(cert.get(), key);
  return cert;
}

bool CoversHosts(X509* cert, const std::vector<std::string>& hosts) {
  for (const std::string& h : hosts) {
    int ok = IsIpAddress(h) ? X509_check_ip_asc(cert, h.c_str(), 0) : X509_check_host(cert, h.c_str(), h.size(), 0, nullptr);
    if (ok != 1) return false;
  }
  return true;
}

// Valid now and for at least `seconds` more.
bool ValidFor(X509* cert, long seconds) {
  time_t later = std::time(nullptr) + seconds;
  time_t now = std::time(nullptr);
  return X509_cmp_time(X509_get0_notBefore(cert), &now) < 0 && X509_cmp_time(X509_get0_notAfter(cert), &later) > 0;
}

}  // namespace

Result<SslContext> MakeServerTlsContext(const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() || key_file.empty()) {
    return Status::InvalidArgument("TLS needs both a certificate (--tls-cert) and its key (--tls-key)");
  }
  for (const auto& [flag, path] : {std::pair{"--tls-cert", cert_file}, std::pair{"--tls-key", key_file}}) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return Status::InvalidArgument(std::string(flag) + " " + path + ": no such file");
  }
  ERR_clear_error();
  SslContext ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return Status::Internal("SSL_CTX_new: " + OpenSslError());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // A peer that hangs up without close_notify reads as the end of the stream, as over TCP.
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
                                     SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1) {
    return Status::InvalidArgument("--tls-cert " + cert_file + ": not a PEM certificate chain (" + OpenSslError() + ")");
  }
  auto key = ReadKey(key_file);
  if (!key.ok()) return Status::InvalidArgument("--tls-key " + key.status().message());
  if (SSL_CTX_use_PrivateKey(ctx.get(), key->get()) != 1 || SSL_CTX_check_private_key(ctx.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("--tls-key " + key_file + " is not the key of the certificate in --tls-cert " +
                                   cert_file);
  }
  return ctx;
}

Result<DevCertificates> EnsureDevCertificates(const std::string& dir, std::vector<std::string> hosts) {
  if (hosts.empty()) hosts = {"127.0.0.1", "::1", "localhost"};
  DevCertificates out{dir + "/ca.pem", dir + "/server.pem", dir + "/server.key"};
  const std::string ca_key_file = dir + "/ca.key";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot create " + dir + ": " + ec.message());
  ERR_clear_error();

  // Keep the CA while it lasts: clients that pinned it keep working across restarts.
  X509Ptr ca;
  KeyPtr ca_key;
  {
    auto c = ReadCertificate(out.ca_file);
    auto k = ReadKey(ca_key_file);
    if (c.ok() && k.ok() && ValidFor(c->get(), 30L * 24 * 3600) && X509_check_private_key(c->get(), k->get()) == 1) {
      ca = std::move(*c);
      ca_key = std::move(*k);
    }
    ERR_clear_error();
  }
  if (ca) {
    auto srv = ReadCertificate(out.cert_file);
    auto key = ReadKey(out.key_file);
    if (srv.ok() && key.ok() && ValidFor(srv->get(), 24L * 3600) && CoversHosts(srv->get(), hosts) &&
        X509_check_private_key(srv->get(), key->get()) == 1 && X509_verify(srv->get(), ca_key.get()) == 1) {
      ERR_clear_error();
      return out;
    }
    ERR_clear_error();
  } else {
    ca_key.reset(EVP_EC_gen("P-256"));
    if (!ca_key) return Status::Internal("cannot make a key: " + OpenSslError());
    char host[256] = "localhost";
    ::gethostname(host, sizeof host - 1);
    GF_ASSIGN_OR_RETURN(ca, MakeCertificate(ca_key.get(), std::string("gpufleet dev CA on ") + host, nullptr, nullptr,
                                            3650));
    GF_RETURN_IF_ERROR(AddExtension(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    GF_RETURN_IF_ERROR(AddExtension(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
    GF_RETURN_IF_ERROR(AddExtension(ca.get(), ca.get(), NID_subject_key_identifier, "hash"));
    if (X509_sign(ca.get(), ca_key.get(), EVP_sha256()) == 0) return Status::Internal("signing the CA: " + OpenSslError());
    EVP_PKEY* k = ca_key.get();
    X509* c = ca.get();
    GF_RETURN_IF_ERROR(WritePem(ca_key_file, 0600, [k](FILE* f) {
      return PEM_write_PrivateKey(f, k, nullptr, nullptr, 0, nullptr, nullptr);
    }));
    GF_RETURN_IF_ERROR(WritePem(out.ca_file, 0644, [c](FILE* f) { return PEM_write_X509(f, c); }));
  }

  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal("cannot make a key: " + OpenSslError());
  GF_ASSIGN_OR_RETURN(X509Ptr srv, MakeCertificate(key.get(), hosts[0], ca.get(), ca_key.get(), 397));
  std::string san;
  for (const std::string& h : hosts) san += (san.empty() ? "" : ",") + std::string(IsIpAddress(h) ? "IP:" : "DNS:") + h;
  GF_RETURN_IF_ERROR(AddExtension(srv.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  GF_RETURN_IF_ERROR(AddExtension(srv.get(), ca.get(), NID_key_usage, "critical,digitalSignature"));
  GF_RETURN_IF_ERROR(AddExtension(srv.get(), ca.get(), NID_ext_key_usage, "serverAuth"));
  GF_RETURN_IF_ERROR(AddExtension(srv.get(), ca.get(), NID_subject_alt_name, san));
  GF_RETURN_IF_ERROR(AddExtension(srv.get(), ca.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(srv.get(), ca_key.get(), EVP_sha256()) == 0) {
    return Status::Internal("signing the server certificate: " + OpenSslError());
  }
  EVP_PKEY* k = key.get();
  X509* s = srv.get();
  GF_RETURN_IF_ERROR(WritePem(out.key_file, 0600, [k](FILE* f) {
    return PEM_write_PrivateKey(f, k, nullptr, nullptr, 0, nullptr, nullptr);
  }));
  GF_RETURN_IF_ERROR(WritePem(out.cert_file, 0644, [s](FILE* f) { return PEM_write_X509(f, s); }));
  return out;
}

Status CheckPlainListen(const std::vector<std::string>& hosts, bool tls, bool insecure) {
  if (tls || insecure) return Status::Ok();
  for (const std::string& host : hosts) {
    if (!IsLoopbackHost(host)) {
      return Status::InvalidArgument("listening on " + host +
                                     " without TLS would send tokens in clear text over the network: give "
                                     "--tls-cert and --tls-key (docs/security.md), or --insecure to accept that");
    }
  }
  return Status::Ok();
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

}  // namespace gpufleet::controller
