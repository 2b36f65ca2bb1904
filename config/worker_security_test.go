package config

import (
	"io"
	"strings"
	"testing"
)

// TestWorkerSecurityFields: the §4a fields come from TOML and from flags
// (flags win), and their combinations are validated.
func TestWorkerSecurityFields(t *testing.T) {
	path := writeFile(t, "sec.toml", `
etcd-username = "dm"
etcd-password = "file-pass"
secret-key-path = "/etc/dm/secret.key"
status-tls-cert = "/etc/dm/api.pem"
status-tls-key = "/etc/dm/api-key.pem"
status-tls-client-ca = "/etc/dm/clients-ca.pem"
`)
	c, err := parseWorkerConfig([]string{"--config", path, "--etcd-password", "flag-pass"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.EtcdUsername != "dm" || c.EtcdPassword != "flag-pass" || c.SecretKeyPath != "/etc/dm/secret.key" ||
		c.StatusTLSCert != "/etc/dm/api.pem" || c.StatusTLSKey != "/etc/dm/api-key.pem" || c.StatusTLSClientCA != "/etc/dm/clients-ca.pem" {
		t.Fatalf("security fields: %+v", c)
	}
	requireProblems(t, c.Validate())

	c, err = parseWorkerConfig([]string{"--etcd-username", "u", "--secret-key-path", "k", "--status-tls-cert", "c", "--status-tls-key", "k2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.EtcdUsername != "u" || c.SecretKeyPath != "k" || c.StatusTLSCert != "c" || c.StatusTLSKey != "k2" {
		t.Fatalf("flags: %+v", c)
	}

	tests := []struct {
		name   string
		mod    func(c *WorkerConfig)
		fields []string
	}{
		{name: "password without user", mod: func(c *WorkerConfig) { c.EtcdPassword = "pw-not-shown" }, fields: []string{"etcd-password"}},
		{name: "user without password", mod: func(c *WorkerConfig) { c.EtcdUsername = "u" }, fields: []string{"etcd-username"}},
		{name: "auth with embedded etcd", mod: func(c *WorkerConfig) { c.EtcdUsername = "u"; c.EtcdPassword = "pw-not-shown"; c.EmbedEtcd = true }, fields: []string{"etcd-username"}},
		{name: "cert without key", mod: func(c *WorkerConfig) { c.StatusTLSCert = "c.pem" }, fields: []string{"status-tls-cert"}},
		{name: "client CA without TLS", mod: func(c *WorkerConfig) { c.StatusTLSClientCA = "ca.pem" }, fields: []string{"status-tls-client-ca"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewWorkerConfig()
			c.Name = "w1"
			tt.mod(c)
			err := c.Validate()
			requireProblems(t, err, tt.fields...)
			if strings.Contains(err.Error(), "pw-not-shown") {
				t.Fatalf("validation error shows the etcd password: %v", err)
			}
		})
	}
}
