package testcluster

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
)

// balancer is the load balancer in front of a multi-node cluster: it owns
// the issuer address and spreads requests over the running nodes, as an
// operator's proxy would. Tests that need a particular node use URL(i).
type balancer struct {
	c    *Cluster
	next atomic.Uint64
	srv  *http.Server
}

func (c *Cluster) startBalancer(ln net.Listener) {
	b := &balancer{c: c}
	b.srv = &http.Server{Handler: b}
	go b.srv.Serve(ln)
	c.lb = b
}

// PinHeader, set to a node's index on a request to the balancer, sends it
// to that node (a test makes a browser finish on another node what it
// began on one, under the one issuer origin).
const PinHeader = "X-Testcluster-Node"

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := len(b.c.nodes)
	start, tries := int(b.next.Add(1)), n
	if v := r.Header.Get(PinHeader); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= n {
			http.Error(w, "testcluster balancer: bad "+PinHeader, http.StatusBadRequest)
			return
		}
		start, tries = i, 1
	}
	for k := 0; k < tries; k++ {
		i := (start + k) % n
		if b.c.Node(i) == nil {
			continue
		}
		target, _ := url.Parse(b.c.URL(i))
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "testcluster balancer: "+err.Error(), http.StatusBadGateway)
		}
		proxy.ServeHTTP(w, r)
		return
	}
	http.Error(w, "testcluster balancer: no node running", http.StatusBadGateway)
}
