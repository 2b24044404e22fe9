package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certWatchEvery is how often the certificate files are checked for a
// change (a SIGHUP reloads at once).
const certWatchEvery = 2 * time.Second

// certReloader serves the --tls-cert/--tls-key pair to every TLS
// handshake (tls.Config.GetCertificate) and replaces it when the files
// change or on Reload, without dropping connections: a handshake takes
// whichever pair is current, and connections made earlier keep theirs. A
// pair that does not load on a reload leaves the current one in place
// and is logged; at start it refuses.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu       sync.RWMutex
	cert     *tls.Certificate
	notAfter time.Time
	stamp    string // the files' sizes and modification times when loaded
}

func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload loads the pair again; on failure the current pair stays.
func (r *certReloader) Reload() error {
	stamp := r.fileStamp()
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", r.certFile, r.keyFile, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("--tls-cert %s: %w", r.certFile, err)
	}
	pair.Leaf = leaf
	r.mu.Lock()
	r.cert, r.notAfter, r.stamp = &pair, leaf.NotAfter, stamp
	r.mu.Unlock()
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

// NotAfter is when the current certificate expires.
func (r *certReloader) NotAfter() time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.notAfter
}

// fileStamp identifies the files' current contents cheaply.
func (r *certReloader) fileStamp() string {
	s := ""
	for _, f := range []string{r.certFile, r.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return s
}

// watch reloads when the files change, until ctx ends.
func (r *certReloader) watch(ctx context.Context) {
	t := time.NewTicker(certWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.RLock()
		same := r.stamp == r.fileStamp()
		r.mu.RUnlock()
		if same {
			continue
		}
		r.reloadAndLog("the files changed")
	}
}

func (r *certReloader) reloadAndLog(why string) {
	if err := r.Reload(); err != nil {
		r.log.Error("TLS certificate not reloaded; keeping the current one", "reason", why, "err", err)
		// Do not try the same broken files every tick: remember them.
		r.mu.Lock()
		r.stamp = r.fileStamp()
		r.mu.Unlock()
		return
	}
	r.log.Info("TLS certificate reloaded", "reason", why, "not_after", r.NotAfter())
}

// tlsConfig is the listeners' TLS: 1.2 at least (1.3 preferred by Go),
// HTTP/2 offered, the certificate from r.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

// ReloadTLS reloads --tls-cert and --tls-key now (SIGHUP); an error says
// why the current pair stays. Without TLS it does nothing.
func (n *Node) ReloadTLS() error {
	if n.certs == nil {
		return nil
	}
	if err := n.certs.Reload(); err != nil {
		n.log.Error("TLS certificate not reloaded; keeping the current one", "reason", "SIGHUP", "err", err)
		return err
	}
	n.log.Info("TLS certificate reloaded", "reason", "SIGHUP", "not_after", n.certs.NotAfter())
	return nil
}

// errTLSPair: one of --tls-cert and --tls-key without the other.
var errTLSPair = errors.New("--tls-cert and --tls-key go together")
