#!/usr/bin/env bash
# Tests/capi/mkcerts.sh DIR
#
# Makes, with the openssl CLI, the throwaway PKI the TLS tests need, into DIR (a temp dir
# of the test run: keys are never committed):
#
#   ca.pem                 a self-signed test CA (what config.ca_file names)
#   server.pem server.key  a certificate for 127.0.0.1 and localhost, signed by that CA
#   other-ca.pem           an unrelated CA, which must not verify server.pem
#   cadir/                 ca.pem under its subject-hash name (openssl rehash), for
#                          pxl_config.ca_path, and as ca-certificates.crt: a stand-in for
#                          the system's store (/etc/ssl/certs) that trusts the test CA
#
# P-256 keys: generated in milliseconds, and every TLS stack here speaks them.
set -euo pipefail
dir="${1:?usage: $0 DIR}"
mkdir -p "$dir"
cd "$dir"
command -v openssl >/dev/null || { echo "mkcerts.sh: openssl not found: run scripts/deps.sh" >&2; exit 1; }

ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
ca_ext=(-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign")
{
  openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj "/CN=pixload test CA" "${ca_ext[@]}"
  openssl req -x509 "${ec[@]}" -keyout other-ca.key -out other-ca.pem -days 2 \
    -subj "/CN=pixload unrelated CA" "${ca_ext[@]}"
  openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=127.0.0.1"
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" > server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile server.ext -out server.pem
} 2>"$dir/openssl.log" || { cat "$dir/openssl.log" >&2; exit 1; }
chmod 600 ./*.key
openssl verify -CAfile ca.pem server.pem >/dev/null
mkdir -p cadir
cp ca.pem cadir/ca-certificates.crt
cp ca.pem "cadir/$(openssl x509 -hash -noout -in ca.pem).0"
openssl verify -CApath cadir -no-CAfile server.pem >/dev/null
