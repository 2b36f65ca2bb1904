package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/dmworker/dm-worker/pkg/secret"
)

func secretCommands() []command {
	return []command{{
		name:  "encrypt",
		args:  "PLAINTEXT|-",
		short: "print PLAINTEXT encrypted with the key of --secret-key-path, for password fields (- reads one line from stdin)",
		run:   encrypt,
	}, {
		name:  "gen-key",
		args:  "FILE",
		short: "write a new random AES-256 key file (mode 0600) for --secret-key-path; never overwrites",
		run:   genKey,
	}}
}

// encryptJSON is the --output json document of "encrypt".
type encryptJSON struct {
	Ciphertext string `json:"ciphertext"`
}

func encrypt(_ context.Context, e *env, cmd *command, args []string) error {
	pos, err := parseArgs(cmd, newFlags(cmd), args, "PLAINTEXT")
	if err != nil {
		return err
	}
	key, err := e.secretKey()
	if err != nil {
		return err
	}
	if key == nil {
		return errors.New("no key: give the global flag --secret-key-path FILE (create one with `dmctl gen-key FILE`); the workers need the same file")
	}
	plain := pos[0]
	if plain == "-" {
		plain, err = readSecretLine(os.Stdin)
		if err != nil {
			return err
		}
	}
	ct, err := secret.Encrypt(key, plain)
	if err != nil {
		return err
	}
	return e.emitf(encryptJSON{Ciphertext: ct}, "%s\n", ct)
}

// readSecretLine reads one line (without its newline) from r.
func readSecretLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the plaintext from stdin: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	return line, nil
}

// genKeyJSON is the --output json document of "gen-key".
type genKeyJSON struct {
	Path string `json:"path"`
}

func genKey(_ context.Context, e *env, cmd *command, args []string) error {
	pos, err := parseArgs(cmd, newFlags(cmd), args, "FILE")
	if err != nil {
		return err
	}
	if _, err := secret.GenerateKeyFile(pos[0]); err != nil {
		return err
	}
	return e.emitf(genKeyJSON{Path: pos[0]}, "wrote a new key to %s (mode 0600); give it to dmctl and every dm-worker as --secret-key-path\n", pos[0])
}

// secretKey loads the key of --secret-key-path; nil without the flag.
// Commands that read configs from etcd resolve passwords with it:
// secret.ResolvePassword(stored, key).
func (e *env) secretKey() (*secret.Key, error) {
	if e.opts.secretKeyPath == "" {
		return nil, nil
	}
	k, err := secret.LoadKeyFile(e.opts.secretKeyPath)
	if err != nil {
		return nil, fmt.Errorf("--secret-key-path: %w", err)
	}
	return k, nil
}

// workerHTTPSClient builds the client for workers' HTTPS APIs from the
// --status-tls-* flags; nil (plain HTTP) when none is given. Errors name
// the file.
func workerHTTPSClient(o globalOptions) (*http.Client, error) {
	if o.statusCA == "" && o.statusCert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.statusCA != "" {
		pem, err := os.ReadFile(o.statusCA)
		if err != nil {
			return nil, fmt.Errorf("--status-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--status-tls-ca %s holds no PEM certificate", o.statusCA)
		}
		cfg.RootCAs = pool
	}
	if o.statusCert != "" {
		cert, err := tls.LoadX509KeyPair(o.statusCert, o.statusKey)
		if err != nil {
			return nil, fmt.Errorf("--status-tls-cert %s / --status-tls-key %s: %w", o.statusCert, o.statusKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}
