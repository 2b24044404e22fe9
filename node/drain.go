package node

import (
	"context"
	"crypto/tls"
	"net/http"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// DefaultShutdownDrain is --shutdown-drain's default.
const DefaultShutdownDrain = 5 * time.Second

// handOverBound bounds the leadership transfer of a planned stop.
const handOverBound = 5 * time.Second

// Drain is the first half of a planned stop (SIGTERM): /readyz answers
// 503 at once, the node keeps serving for ShutdownDrain so that a load
// balancer's health check takes it out before connections are refused,
// and a leader then hands leadership to another voter, so the cluster's
// next write does not wait an election timeout. Close follows. ctx ending
// (a second signal) cuts the drain short.
func (n *Node) Drain(ctx context.Context) {
	if !n.draining.CompareAndSwap(false, true) {
		return
	}
	notify(daemon.SdNotifyStopping)
	n.log.Info("draining: /readyz answers 503", "for", n.cfg.ShutdownDrain)
	if n.cfg.ShutdownDrain > 0 {
		select {
		case <-time.After(n.cfg.ShutdownDrain):
		case <-ctx.Done():
			return
		}
	}
	hctx, cancel := context.WithTimeout(ctx, handOverBound)
	defer cancel()
	wasLeader, start := n.cluster.IsLeader(), time.Now()
	if err := n.cluster.HandOver(hctx); err != nil {
		n.log.Warn("leadership not handed over before stopping", "err", err)
	} else if wasLeader && !n.cluster.IsLeader() {
		n.log.Info("leadership handed over", "took", time.Since(start).Round(time.Millisecond))
	}
}

// notify tells systemd about the node's state when it runs the node as a
// Type=notify service ($NOTIFY_SOCKET); elsewhere it does nothing.
func notify(state string) { _, _ = daemon.SdNotify(false, state) }

// notifyReady sends READY=1 once the node is ready (readiness), and then
// pings the watchdog (WatchdogSec) at half its interval for as long as
// the node's HTTP server and raft answer, until the node closes.
func (n *Node) notifyReady() {
	for !n.isReady() {
		select {
		case <-n.closing:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	notify(daemon.SdNotifyReady)
	every, err := daemon.SdWatchdogEnabled(false)
	if err != nil || every <= 0 {
		return
	}
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
			if n.live() {
				notify(daemon.SdNotifyWatchdog)
			}
		}
	}
}

// live reports whether the node's loops answer: raft has not shut down,
// and the HTTP server answers its own /healthz.
func (n *Node) live() bool {
	if n.cluster.Stats()["state"] == "Shutdown" {
		return false
	}
	scheme := "http"
	tr := &http.Transport{}
	if n.certs != nil {
		scheme = "https"
		// #nosec G402 -- the node asks itself over loopback whether its server answers; nothing is trusted from the answer
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Get(scheme + "://" + n.listener.Addr().String() + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// isReady reports whether every readiness check passes.
func (n *Node) isReady() bool {
	for _, c := range n.readiness() {
		if !c.OK {
			return false
		}
	}
	return true
}
