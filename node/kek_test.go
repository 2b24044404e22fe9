package node_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/lestrrat-go/jwx/v2/jws"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/node"
	browsersession "github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/testcluster"
)

// writeKEK writes a fresh KEK, base64 as `oidcd keygen` prints it, to a
// 0600 file and returns its path and the loaded key.
func writeKEK(t testing.TB) (string, *kek.KEK) {
	t.Helper()
	raw := make([]byte, kek.Size)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := kek.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, k
}

// needles are the spellings under which secret could sit in a file: its
// bytes, and its base64 (how JSON encodes []byte: raft commands, bbolt
// values) at each of the three alignments it can have inside a longer
// base64 string, in both alphabets. A secret of 24 bytes or more gives
// needles of 30 characters or more, which do not occur by chance.
func needles(secret []byte) [][]byte {
	out := [][]byte{secret}
	for skip := range 3 {
		s := secret[skip:]
		s = s[:len(s)/3*3]
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			out = append(out, []byte(enc.EncodeToString(s)))
		}
	}
	return out
}

func holds(b, secret []byte) bool {
	for _, n := range needles(secret) {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}

// atRest is every file a node keeps on disk, plus a backup taken with
// `oidcd admin snapshot save`, by path.
func atRest(t *testing.T, c *testcluster.Cluster, i int) map[string][]byte {
	t.Helper()
	n := c.Node(i)
	if err := n.Cluster().Snapshot(); err != nil {
		t.Fatalf("raft snapshot: %v", err)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if code, _, errOut := snapCLI(t, c, i, "snapshot", "save", backup); code != 0 {
		t.Fatalf("oidcd admin snapshot save: exit %d: %s", code, errOut)
	}
	files := map[string][]byte{}
	read := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = b
	}
	read(backup)
	err := filepath.WalkDir(n.DataDir(), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			read(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"state.db", "raft.db", "state.bin", "backup.db"} {
		found := false
		for path := range files {
			found = found || filepath.Base(path) == want
		}
		if !found {
			t.Fatalf("no %s among the files at rest: the test looks in the wrong places", want)
		}
	}
	return files
}

// secretsOf opens node i's signing keys and browser key with k, and
// returns each stored record with its plaintexts (the PKCS#8 DER and the
// RSA private exponent; the 32-byte browser key).
func secretsOf(t *testing.T, n *node.Node, k *kek.KEK) (stored map[string][]byte, plain map[string][][]byte) {
	t.Helper()
	stored, plain = map[string][]byte{}, map[string][][]byte{}
	ks, _, err := n.FSM().State().Keys()
	if err != nil || len(ks) == 0 {
		t.Fatalf("stored keys: %d, %v", len(ks), err)
	}
	for _, key := range ks {
		der, err := k.Open(key.Private, keys.PrivateKeyAAD(key.Kid))
		if err != nil {
			t.Fatalf("open signing key %s: %v", key.Kid, err)
		}
		priv, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			t.Fatal(err)
		}
		name := "signing key " + key.Kid
		stored[name] = key.Private
		plain[name] = [][]byte{der, priv.(*rsa.PrivateKey).D.Bytes()}
	}
	bk, err := n.FSM().State().Secret(fsm.SecretBrowserKey)
	if err != nil {
		t.Fatal(err)
	}
	open, err := browsersession.OpenBrowserKey(k, bk)
	if err != nil {
		t.Fatal(err)
	}
	stored["browser key"], plain["browser key"] = bk, [][]byte{open}
	err = n.FSM().State().TOTPSecrets(func(userID string, sealed []byte) error {
		secret, err := k.Open(sealed, factor.TOTPAAD(userID))
		if err != nil {
			return err
		}
		stored["totp secret "+userID], plain["totp secret "+userID] = sealed, [][]byte{secret}
		return nil
	})
	if err != nil || len(stored) < 3 {
		t.Fatalf("totp secrets: %v (%d secrets in all)", err, len(stored))
	}
	return stored, plain
}

// TestSecretsAtRestSealedUnderKEK: with --kek-file, neither the signing
// keys (PKCS#8 DER, private exponent) nor the browser key appear, raw or
// base64, in the state file, the raft log, a raft snapshot or a backup;
// their sealed records do, and sign-in works. Without --kek-file the same
// search finds them, which shows the search would catch a leak.
func TestSecretsAtRestSealedUnderKEK(t *testing.T) {
	kekFile, k := writeKEK(t)
	for _, tc := range []struct {
		name string
		file string
		kek  *kek.KEK
	}{
		{"with KEK", kekFile, k},
		{"without KEK", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.KEKFile = tc.file }})
			if got := c.Node(0).KEK().ID(); got != tc.kek.ID() {
				t.Fatalf("node KEK id: got %q, want %q", got, tc.kek.ID())
			}
			// A key proposed by the admin API, and a full sign-in: the
			// sealed browser key opens and sealed keys sign.
			if resp := do(t, c, "POST", "/admin/v1/keys/rotate", testcluster.AdminToken, map[string]any{}, nil); resp.StatusCode != http.StatusCreated {
				t.Fatalf("rotate: got %d, want 201", resp.StatusCode)
			}
			w := provision(t, c)
			if resp := do(t, c, "POST", "/admin/v1/users/"+w.user+"/totp", testcluster.AdminToken, nil, nil); resp.StatusCode != http.StatusCreated {
				t.Fatalf("totp: got %d", resp.StatusCode)
			}
			r := newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID)
			pkce := oauth2.GenerateVerifier()
			q := signIn(t, c, testcluster.NewBrowser(t), r, w, pkce, "nonce-0123456789")
			tok, err := r.oauth.Exchange(t.Context(), q.Get("code"), oauth2.VerifierOption(pkce))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.verifier.Verify(t.Context(), tok.Extra("id_token").(string)); err != nil {
				t.Fatal(err)
			}

			stored, plain := secretsOf(t, c.Node(0), tc.kek)
			files := atRest(t, c, 0)
			for name, rec := range stored {
				if got := kek.Sealed(rec); got != (tc.kek != nil) {
					t.Errorf("%s sealed: got %v, want %v", name, got, tc.kek != nil)
				}
				for path, b := range files {
					// The files that hold the state: the search must find
					// the stored record there, or it proves nothing.
					core := strings.Contains(" state.db raft.db state.bin backup.db ", " "+filepath.Base(path)+" ")
					if core && !holds(b, rec) {
						t.Errorf("%s: the stored record of the %s is not found: the search misses it", path, name)
					}
					for i, p := range plain[name] {
						found := holds(b, p)
						if tc.kek != nil && found {
							t.Errorf("%s holds the %s (plaintext %d) in the clear", path, name, i)
						}
						if tc.kek == nil && core && !found {
							t.Errorf("%s: the clear %s (plaintext %d) is not found: the search misses it", path, name, i)
						}
					}
				}
			}
		})
	}
}

// TestNodeRefusesTheWrongKEK: a node restarted on its data directory
// with another KEK, or with none, refuses to start with an error naming
// the key the state needs; a KEK file others can read is refused too.
// With the right KEK it starts and signs.
func TestNodeRefusesTheWrongKEK(t *testing.T) {
	kekFile, k := writeKEK(t)
	otherFile, other := writeKEK(t)
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.KEKFile = kekFile }})
	dir, id := c.Node(0).DataDir(), c.Node(0).ID()
	c.Kill(0)

	loose := filepath.Join(t.TempDir(), "kek-loose")
	b, _ := os.ReadFile(kekFile)
	if err := os.WriteFile(loose, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		file    string
		is      error
		mention []string
	}{
		{"another KEK", otherFile, kek.ErrWrongKEK, []string{"--kek-file", k.ID(), other.ID(), "state.db"}},
		{"no KEK", "", kek.ErrNoKEK, []string{"--kek-file", k.ID(), "state.db"}},
		{"readable by others", loose, nil, []string{"--kek-file", "0644", "chmod 600"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			httpLn, raftLn := listenLocal(t), listenLocal(t)
			n, err := node.New(node.Config{
				DataDir: dir, NodeID: id, KEKFile: tc.file, AdminToken: testcluster.AdminToken,
				HTTPListener: httpLn, RaftListener: raftLn, Issuer: "http://" + httpLn.Addr().String(),
			})
			if err == nil {
				n.Close()
				t.Fatal("node started")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("got %v, want %v", err, tc.is)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}

	c.Restart(0) // its own config: the right KEK
	tok, err := c.Node(0).Keys().Sign(map[string]any{"sub": "s"}, keys.TypJWT)
	if err != nil {
		t.Fatalf("sign after restart with the right KEK: %v", err)
	}
	if _, err := c.Node(0).Keys().Verify(tok); err != nil {
		t.Fatal(err)
	}
}

func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestThreeNodesShareOneKEK: three nodes with one KEK. A key proposed by a
// follower is sealed, every node opens it and signs with it, relying
// parties verify; a sign-in begun on one node continues on another (the
// sealed browser key opens everywhere).
func TestThreeNodesShareOneKEK(t *testing.T) {
	kekFile, k := writeKEK(t)
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) { cfg.KEKFile = kekFile }})
	follower := c.Followers()[0]
	var rotated map[string]any
	if resp := snapAdmin(t, c, follower, "POST", "/admin/v1/keys/rotate", map[string]any{"immediate": true}, &rotated); resp.StatusCode != http.StatusCreated {
		t.Fatalf("rotate on follower %d: got %d %v, want 201", follower, resp.StatusCode, rotated)
	}
	kid, _ := rotated["kid"].(string)
	for i := range 3 {
		n := c.Node(i)
		if n.KEK().ID() != k.ID() {
			t.Fatalf("node %d KEK id: got %q, want %q", i, n.KEK().ID(), k.ID())
		}
		var tok []byte
		snapWait(t, "node "+n.ID()+" signs with the rotated key", func() (bool, string) {
			var err error
			tok, err = n.Keys().Sign(map[string]any{"sub": "s", "iss": c.Issuer()}, keys.TypJWT)
			if err != nil {
				return false, err.Error()
			}
			msg, err := jws.Parse(tok)
			if err != nil {
				return false, err.Error()
			}
			got := msg.Signatures()[0].ProtectedHeaders().KeyID()
			return got == kid, "kid " + got
		})
		for j := range 3 {
			// Node j may apply the rotation a moment after node i did.
			snapWait(t, fmt.Sprintf("node %d verifies a token signed by node %d", j, i), func() (bool, string) {
				_, err := c.Node(j).Keys().Verify(tok)
				if err != nil {
					return false, err.Error()
				}
				return true, ""
			})
		}
		ks, _, err := n.FSM().State().Keys()
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range ks {
			if _, err := k.Open(key.Private, keys.PrivateKeyAAD(key.Kid)); err != nil || !kek.Sealed(key.Private) {
				t.Errorf("node %d key %s: sealed %v, opens: %v", i, key.Kid, kek.Sealed(key.Private), err)
			}
		}
		if bk, err := n.FSM().State().Secret(fsm.SecretBrowserKey); err != nil || !kek.Sealed(bk) {
			t.Errorf("node %d browser key: sealed %v, %v", i, kek.Sealed(bk), err)
		}
	}
	w := provision(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, nodes := range [][2]int{{0, 1}, {1, 2}, {2, 0}} {
		r := rpOn(t, c, nodes[0], nodes[1], w.confID, w.confSecret, w.cb)
		pkce := oauth2.GenerateVerifier()
		q := signIn(t, c, testcluster.NewBrowser(t), r, w, pkce, "nonce-0123456789")
		tok, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
		if err != nil {
			t.Fatalf("exchange on node %d: %v", nodes[1], err)
		}
		idt, err := r.verifier.Verify(ctx, tok.Extra("id_token").(string))
		if err != nil {
			t.Fatalf("relying party rejects the ID token: %v", err)
		}
		if idt.Subject != w.user {
			t.Errorf("sub: got %q, want %q", idt.Subject, w.user)
		}
	}
}
