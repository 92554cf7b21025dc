// TLS for the controller's listeners: a server context from a certificate chain and key, and the
// local certificate authority `gpufleet dev --tls` makes for itself.
//
// The dev CA is a real one (an EC P-256 key, a self-signed CA:TRUE certificate) that signs one
// server certificate for 127.0.0.1, ::1 and localhost; the CLI config and the dev agents trust that
// CA alone (a pinned CA), so a certificate from anywhere else is refused. Keys are written 0600.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpufleet::controller {

using SslContext = std::shared_ptr<SSL_CTX>;

// A server context (TLS 1.2 or newer) with the certificate chain of `cert_file` (PEM, leaf first)
// and the private key of `key_file`. Errors name the file and what is wrong with it, including a
// key that does not match the certificate.
Result<SslContext> MakeServerTlsContext(const std::string& cert_file, const std::string& key_file);

struct DevCertificates {
  std::string ca_file;    // the CA certificate: what clients pin
  std::string cert_file;  // the server's certificate
  std::string key_file;   // the server's key (0600)
};

// The CA and server certificate under `dir` (ca.pem, ca.key, server.pem, server.key): made on the
// first call, reused while the server certificate is valid for at least a day more and names every
// host of `hosts`, remade otherwise. `hosts` are IP addresses or DNS names (default: 127.0.0.1,
// ::1, localhost).
Result<DevCertificates> EnsureDevCertificates(const std::string& dir, std::vector<std::string> hosts = {});

// Whether `host` (a listen address) is reachable only from this machine: 127.0.0.0/8, ::1,
// localhost. Binding anything else without TLS needs an explicit --insecure.
bool IsLoopbackHost(const std::string& host);

// Ok, or InvalidArgument naming the first of `hosts` that is not loopback when serving without TLS
// (`tls` false) and without --insecure: tokens travel in every request, in clear text only where
// nobody else can listen. The one rule the server applies at its start and the CLI before it
// writes anything.
Status CheckPlainListen(const std::vector<std::string>& hosts, bool tls, bool insecure);

}  // namespace gpufleet::controller
