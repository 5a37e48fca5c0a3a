// Certificates for tests of TLS, made by `openssl` at test time in a
// folder of their own: a CA ("ca"); a server certificate ("server") for
// localhost, 127.0.0.1 and tessera-ps.test that serves as a client's too;
// a client certificate ("client"); and a second CA ("other_ca") with a
// client certificate of its own ("rogue"). EC keys, valid one day.
#ifndef TESSERA_TESTS_TLS_TEST_CERTS_H_
#define TESSERA_TESTS_TLS_TEST_CERTS_H_

#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rpc/tls_files.h"
#include "gtest/gtest.h"
#include "tests/shell_command.h"

namespace tessera {

class TestCertificates {
 public:
  // Makes them under a folder of TempDir() named after `tag` and this
  // process (ctest runs cases in parallel processes). error() says what
  // went wrong when openssl could not.
  explicit TestCertificates(const std::string& tag)
      : dir_(absl::StrCat(::testing::TempDir(), "/tessera_", tag, "_",
                          getpid())) {
    const std::string& d = dir_;
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1";
    auto ca = [&](const std::string& name) {
      return absl::StrCat("openssl req -x509 ", ec, " -nodes -days 1 -keyout ",
                          d, "/", name, ".key -out ", d, "/", name,
                          ".pem -subj /CN=", name,
                          " -addext basicConstraints=critical,CA:TRUE"
                          " -addext keyUsage=critical,keyCertSign,cRLSign && ");
    };
    auto leaf = [&](const std::string& name, const std::string& ca_name,
                    const std::string& ext) {
      return absl::StrCat(
          "printf '", ext, "' > ", d, "/", name, ".ext && openssl req ", ec,
          " -nodes -keyout ", d, "/", name, ".key -out ", d, "/", name,
          ".csr -subj /CN=", name, " && openssl x509 -req -days 1 -in ", d, "/",
          name, ".csr -CA ", d, "/", ca_name, ".pem -CAkey ", d, "/", ca_name,
          ".key -CAcreateserial -out ", d, "/", name, ".pem -extfile ", d, "/",
          name, ".ext && ");
    };
    const std::string script = absl::StrCat(
        "rm -rf ", d, " && mkdir -p ", d, " && ", ca("ca"), ca("other_ca"),
        leaf("server", "ca",
             "subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:tessera-ps.test\\n"
             "extendedKeyUsage=serverAuth,clientAuth\\n"),
        leaf("client", "ca", "extendedKeyUsage=clientAuth\\n"),
        leaf("rogue", "other_ca", "extendedKeyUsage=clientAuth\\n"), "true");
    ShellResult run = Shell("(" + script + ")");
    if (run.exit_code != 0) error_ = run.output;
  }
  ~TestCertificates() { Shell("rm -rf " + dir_); }
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  const std::optional<std::string>& error() const { return error_; }
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  // The certificate and key `name`, trusting the CA `ca`.
  TlsFiles Files(const std::string& name, const std::string& ca) const {
    return TlsFiles{Read(Path(name + ".pem")), Read(Path(name + ".key")),
                    Read(Path(ca + ".pem"))};
  }

 private:
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  const std::string dir_;
  std::optional<std::string> error_;
};

}  // namespace tessera

#endif  // TESSERA_TESTS_TLS_TEST_CERTS_H_
