package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/testcluster"
)

// The outbound test runs itself again inside a user and network namespace
// of its own (unshare -rn), where these name what it is given.
const (
	outboundChildEnv = "OIDCD_TEST_OUTBOUND_NETNS" // set in the re-run inside the namespace
	outboundBinEnv   = "OIDCD_TEST_OUTBOUND_BIN"   // the oidcd binary it runs
	// outsideNet stands for any address beyond this machine: TEST-NET-2
	// (RFC 5737), which no one is at. Inside the namespace it leads into
	// the test's own interface, nowhere else.
	outsideNet = "198.51.100."
)

// TestNoOutboundConnectionWithNothingConfigured: a node that is given none
// of the settings that make it call out (docs/operators/install.md,
// "Outbound connections") opens no connection beyond 127.0.0.1 while it
// starts, signs a person in (authorization, the password, the code, the
// token, userinfo) and signs them out, and sends no packet to any other
// address: no DNS query, no gossip, no call home.
//
// It runs the built binary in a network namespace the test makes
// (unshare -rn: a user namespace, so no privilege is needed, and a network
// namespace holding only loopback). There every address but loopback is
// routed into a TUN interface whose packets the test reads: a connect to
// anything else, TCP or UDP (a DNS query through /etc/resolv.conf's
// server included), is seen there with its destination, and nothing
// leaves the namespace. The sockets of the namespace (/proc/net/tcp,
// tcp6, udp, udp6) are also read every 20 ms for a remote other than
// 127.0.0.1, which catches the rest of 127.0.0.0/8 and ::1.
//
// A test that cannot fail proves nothing, so the same run also starts
// nodes that are given one such setting each, pointed at an outside
// address, and requires that the test sees their attempt: a peer to join
// (--join), a client's back-channel logout URI, the mail relay
// (--smtp-url), and an issuer whose name needs DNS.
func TestNoOutboundConnectionWithNothingConfigured(t *testing.T) {
	if os.Getenv(outboundChildEnv) == "" {
		runInNetns(t)
		return
	}
	bin := os.Getenv(outboundBinEnv)
	watch := newCapture(t)

	t.Run("nothing configured", func(t *testing.T) {
		watch.reset()
		n := startNodeArgs(t, bin, true)
		signInAndOut(t, n, "")
		time.Sleep(2 * time.Second) // the leader's loops, a delivery that would follow the sign-out
		if seen := watch.seen(); len(seen) > 0 {
			t.Errorf("a node with nothing configured tried to reach beyond 127.0.0.1:\n%s", strings.Join(seen, "\n"))
		}
	})

	// The controls: each setting's attempt is seen.
	controls := []struct {
		name, want string
		args       []string
		ready      bool
		act        func(t *testing.T, n *liveNode)
	}{
		{name: "a peer to join", want: "tcp " + outsideNet + "9:8301", args: []string{"--join", outsideNet + "9:8301",
			"--cluster-key", base64.StdEncoding.EncodeToString(make([]byte, 32))}},
		{name: "a back-channel logout URI", want: "tcp " + outsideNet + "7:80", ready: true, act: func(t *testing.T, n *liveNode) {
			signInAndOut(t, n, "http://"+outsideNet+"7/backchannel")
		}},
		{name: "the mail relay", want: "tcp " + outsideNet + "25:587", ready: true,
			args: []string{"--smtp-url", "smtp://" + outsideNet + "25:587", "--smtp-from", "ID <id@example.com>"},
			act: func(t *testing.T, n *liveNode) {
				s := provisionSite(t, n)
				if code := n.adminCode(t, "POST", "/users/"+s.user+"/verify-email", map[string]any{}, nil); code/100 != 2 {
					t.Fatalf("POST /users/{id}/verify-email: %d, want a message sent", code)
				}
			}},
		{name: "a name to look up", want: "udp " + nameserver(t) + ":53", ready: true, act: func(t *testing.T, n *liveNode) {
			s := provisionSite(t, n)
			n.admin(t, 200, "PATCH", "/clients/"+url.PathEscape(s.rp.ClientID), map[string]any{"backchannel_logout_uri": "https://receiver.example.com/backchannel"}, nil)
			b := testcluster.NewBrowser(t)
			page := s.authorize(t, b, "")
			tok := exchange(t, s, page)
			logout(t, n, b, tok)
		}},
	}
	for _, c := range controls {
		t.Run("control: "+c.name, func(t *testing.T) {
			watch.reset()
			n := startNodeArgs(t, bin, c.ready, c.args...)
			if c.act != nil {
				c.act(t, n)
			}
			deadline := time.Now().Add(15 * time.Second)
			for !watch.saw(c.want) {
				if time.Now().After(deadline) {
					t.Fatalf("no attempt to %q seen within 15 s: the test would not see a node call out (it saw %q)", c.want, watch.seen())
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("seen: %s", strings.Join(watch.seen(), "; "))
		})
	}
}

// signInAndOut provisions a site on n (with backchannel as its client's
// back-channel logout URI unless empty), signs Ann in with her password
// through the whole code flow, asks userinfo, and signs her out.
func signInAndOut(t *testing.T, n *liveNode, backchannel string) {
	t.Helper()
	s := provisionSite(t, n)
	if backchannel != "" {
		n.admin(t, 200, "PATCH", "/clients/"+url.PathEscape(s.rp.ClientID), map[string]any{"backchannel_logout_uri": backchannel}, nil)
	}
	b := testcluster.NewBrowser(t)
	page := s.authorize(t, b, "")
	tok := exchange(t, s, page)
	p, err := gooidc.NewProvider(context.Background(), n.issuer)
	if err != nil {
		t.Fatal(err)
	}
	ui, err := p.UserInfo(context.Background(), oauth2.StaticTokenSource(tok))
	if err != nil || ui.Subject != s.user {
		t.Fatalf("userinfo: %+v %v, want sub %s", ui, err, s.user)
	}
	logout(t, n, b, tok)
}

// exchange redeems the code of the callback redirect page and checks the
// ID token.
func exchange(t *testing.T, s *site, page *testcluster.Page) *oauth2.Token {
	t.Helper()
	loc, err := url.Parse(page.Location())
	if err != nil || !strings.HasPrefix(page.Location(), s.cb) || loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %q\n%s", page.Status, page.Location(), page.Body)
	}
	tok, err := s.rp.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkceVerifier))
	if err != nil {
		t.Fatal(err)
	}
	idt, _ := tok.Extra("id_token").(string)
	if _, err := s.verifier.Verify(context.Background(), idt); err != nil {
		t.Fatalf("ID token: %v", err)
	}
	return tok
}

// logout ends the session of b with the ID token of tok (RP-initiated
// logout, no redirect back).
func logout(t *testing.T, n *liveNode, b *testcluster.Browser, tok *oauth2.Token) {
	t.Helper()
	idt, _ := tok.Extra("id_token").(string)
	resp, err := b.Client.PostForm(n.issuer+"/logout", url.Values{"id_token_hint": {idt}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /logout: %d, want 200 (signed out)", resp.StatusCode)
	}
}

// nameserver is the first server of /etc/resolv.conf, which a lookup
// asks (Go's default, 127.0.0.1, where it names none).
func nameserver(t *testing.T) string {
	t.Helper()
	b, _ := os.ReadFile("/etc/resolv.conf")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "nameserver" {
			if f[1] == "127.0.0.1" {
				break
			}
			return f[1]
		}
	}
	t.Fatal("/etc/resolv.conf names no nameserver but 127.0.0.1, to which the test cannot tell a lookup from the node's own traffic")
	return ""
}

// startNodeArgs starts one node of bin on 127.0.0.1 with the admin token
// in its environment and args added, and, when ready, waits until it
// serves discovery and has a signing key.
func startNodeArgs(t *testing.T, bin string, ready bool, args ...string) *liveNode {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 3)
	n := &liveNode{issuer: "http://" + ports[0], dir: dir, raftAddr: ports[1], token: strings.Repeat("b2", 24)}
	log, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(bin, append([]string{"serve", "--issuer", n.issuer, "--http-addr", ports[0], "--raft-addr", ports[1],
		"--gossip-addr", ports[2], "--data-dir", filepath.Join(dir, "data"), "--rate-limit", "off", "--shutdown-drain", "0s"}, args...)...)
	n.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "OIDCD_ADMIN_TOKEN=" + n.token}
	n.cmd.Stdout, n.cmd.Stderr = log, log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop(t, n.cmd)
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("node log:\n%s", b)
		}
	})
	if !ready {
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(n.issuer + "/.well-known/openid-configuration"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 && n.adminCode(t, "GET", "/keys", nil, nil) == 200 && n.jwksHasKey(t) {
				return n
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the node did not serve with a signing key within 30 s")
		}
	}
}

// runInNetns runs this test again inside `unshare -rn` with the built
// binary, and passes on its verdict; it skips, saying why, where this
// machine cannot make the namespace.
func runInNetns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("network namespaces are Linux's")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing (util-linux, iproute2): the test cannot make its network namespace", tool)
		}
	}
	if out, err := exec.Command("unshare", "-rn", "ip", "tuntap", "add", "probe0", "mode", "tun").CombinedOutput(); err != nil {
		t.Skipf("this machine cannot make a user and network namespace with a TUN device (unshare -rn ip tuntap add: %v: %s); "+
			"unprivileged user namespaces may be off (sysctl kernel.unprivileged_userns_clone, AppArmor's restrict_unprivileged_userns)",
			err, strings.TrimSpace(string(out)))
	}
	bin := builtBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-rn", os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), outboundChildEnv+"=1", outboundBinEnv+"="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("inside the namespace: %v\n%s", err, out)
	}
	// The verdicts must be there: a run that skipped or ran nothing is no pass.
	for _, sub := range []string{"nothing_configured", "control:_a_peer_to_join", "control:_a_back-channel_logout_URI", "control:_the_mail_relay", "control:_a_name_to_look_up"} {
		if !strings.Contains(string(out), "--- PASS: "+t.Name()+"/"+sub+" ") {
			t.Errorf("inside the namespace, %s did not pass:\n%s", sub, out)
		}
	}
	if testing.Verbose() {
		t.Logf("inside the namespace:\n%s", out)
	}
}

// capture is the test's view of the namespace's traffic beyond
// 127.0.0.1: the packets routed into its TUN interface and the sockets
// whose remote is elsewhere, each as "tcp|udp|icmp… ADDR:PORT".
type capture struct {
	mu   sync.Mutex
	got  []string
	tun  *os.File
	done chan struct{}
}

// newCapture brings the namespace's loopback up, routes every other IPv4
// and IPv6 address into a TUN interface the test reads, and starts
// reading it and the namespace's socket tables.
func newCapture(t *testing.T) *capture {
	t.Helper()
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("link", "set", "lo", "up")
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("/dev/net/tun: %v", err)
	}
	var ifr [40]byte // struct ifreq: the name, then the flags
	copy(ifr[:], "out0")
	binary.NativeEndian.PutUint16(ifr[16:], 0x0001|0x1000) // IFF_TUN | IFF_NO_PI
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), 0x400454ca /* TUNSETIFF */, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		t.Fatalf("TUNSETIFF: %v", e)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	c := &capture{tun: os.NewFile(uintptr(fd), "out0"), done: make(chan struct{})}
	ip("addr", "add", "192.0.2.1/32", "dev", "out0")
	ip("link", "set", "out0", "up")
	ip("route", "add", "default", "dev", "out0")
	ip("-6", "addr", "add", "2001:db8::1/128", "dev", "out0", "nodad")
	ip("-6", "route", "add", "default", "dev", "out0")
	go c.readTUN()
	go c.pollSockets()
	t.Cleanup(func() { close(c.done); c.tun.Close() })
	return c
}

func (c *capture) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.got {
		if g == s {
			return
		}
	}
	c.got = append(c.got, s)
}

func (c *capture) reset() { c.mu.Lock(); c.got = nil; c.mu.Unlock() }

func (c *capture) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func (c *capture) saw(prefix string) bool {
	for _, s := range c.seen() {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// readTUN records each TCP and UDP packet routed out of the namespace by
// protocol and destination. The kernel's own ICMPv6 (router solicitation,
// multicast listener reports as the interface comes up) is not a
// connection and is left out.
func (c *capture) readTUN() {
	buf := make([]byte, 65536)
	for {
		n, err := c.tun.Read(buf)
		if err != nil {
			return
		}
		p := buf[:n]
		var proto byte
		var dst net.IP
		var l4 []byte
		switch {
		case n >= 20 && p[0]>>4 == 4:
			ihl := int(p[0]&0x0f) * 4
			proto, dst, l4 = p[9], net.IP(p[16:20]), p[min(ihl, n):]
		case n >= 40 && p[0]>>4 == 6:
			proto, dst, l4 = p[6], net.IP(p[24:40]), p[40:]
		default:
			continue
		}
		name := map[byte]string{6: "tcp", 17: "udp"}[proto]
		if name == "" || len(l4) < 4 {
			continue
		}
		c.add(fmt.Sprintf("%s %s", name, net.JoinHostPort(dst.String(), fmt.Sprint(binary.BigEndian.Uint16(l4[2:4])))))
	}
}

// pollSockets records every socket of the namespace whose remote address
// is set and is not 127.0.0.1.
func (c *capture) pollSockets() {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
			f, err := os.Open("/proc/net/" + table)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(f)
			sc.Scan() // the header
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				if len(fields) < 3 {
					continue
				}
				addr, port, ok := procAddr(fields[2])
				if !ok || port == 0 && addr.IsUnspecified() {
					continue
				}
				if v4 := addr.To4(); v4 != nil && v4.Equal(net.IPv4(127, 0, 0, 1)) {
					continue
				}
				c.add(fmt.Sprintf("%s %s", strings.TrimSuffix(table, "6"), net.JoinHostPort(addr.String(), fmt.Sprint(port))))
			}
			f.Close()
		}
	}
}

// procAddr reads an address of /proc/net/{tcp,udp}[6]: hex, each 32-bit
// word in host order, then the port.
func procAddr(s string) (net.IP, uint16, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, 0, false
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	var port uint16
	if _, err := fmt.Sscanf(p, "%X", &port); err != nil {
		return nil, 0, false
	}
	return ip, port, true
}
