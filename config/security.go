package config

import "slices"

// Security is the TLS block of a connection to a MySQL-compatible server
// (DM's `security`, under `from` of a source and under `target-database` of
// a task). With any field set the connection uses TLS and never falls back
// to plain text, so the password is never sent in clear.
//
//   - ssl-ca: PEM file of the CA that signed the server's certificate; with
//     it the server certificate is verified (chain and, unless
//     cert-allowed-cn says otherwise, host name).
//   - ssl-cert, ssl-key: PEM client certificate and key, given together,
//     for servers that require X509 from the user.
//   - cert-allowed-cn: when non-empty, the server certificate's common name
//     must be one of these (instead of matching the host name).
type Security struct {
	SSLCA         string   `json:"ssl-ca,omitempty" toml:"ssl-ca"`
	SSLCert       string   `json:"ssl-cert,omitempty" toml:"ssl-cert"`
	SSLKey        string   `json:"ssl-key,omitempty" toml:"ssl-key"`
	CertAllowedCN []string `json:"cert-allowed-cn,omitempty" toml:"cert-allowed-cn"`
}

// Enabled reports whether the block asks for TLS at all.
func (s *Security) Enabled() bool {
	return s != nil && (s.SSLCA != "" || s.SSLCert != "" || s.SSLKey != "" || len(s.CertAllowedCN) > 0)
}

func (s *Security) clone() *Security {
	if s == nil {
		return nil
	}
	r := *s
	r.CertAllowedCN = slices.Clone(s.CertAllowedCN)
	return &r
}

// validate checks that cert and key come together; whether the files can be
// read is checked where the connection is built, so that the error names
// the file and the object using it.
func (s *Security) validate(p *problems, path string) {
	if s == nil {
		return
	}
	if (s.SSLCert == "") != (s.SSLKey == "") {
		p.add(join(path, "ssl-cert"), s.SSLCert, "ssl-cert and ssl-key must be given together")
	}
}
