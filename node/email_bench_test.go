package node_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/smtptest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// benchWorkers is how many callers commit at once in the email benchmark.
const benchWorkers = 16

// applyAll applies n commands made by mk from benchWorkers goroutines
// through applier and returns how long it took.
func applyAll(b *testing.B, applier interface {
	Apply(context.Context, fsm.Command) (fsm.Result, error)
}, n int, mk func(i int) fsm.Command) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchWorkers)
	start := time.Now()
	for range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				res, err := applier.Apply(context.Background(), mk(i))
				if err == nil {
					err = res.Err
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return took
}

// BenchmarkEmailDelivery: b.N password-reset messages, one a command, are
// committed by 16 callers through a follower (the leader itself on one
// node), as a sign-in page would; the leader delivers them to the outbox
// file (fsync a line) or to a real Exim through STARTTLS. Reported: the
// rate of no-op commands through the same node measured first in the same
// run (the raft commit ceiling), the rate messages were committed, and the
// rate they were committed and recorded sent, from the first commit to the
// last outcome.
//
//	go test -run '^$' -bench BenchmarkEmailDelivery -benchtime 2000x ./node/
func BenchmarkEmailDelivery(b *testing.B) {
	for _, size := range []int{1, 3} {
		for _, dest := range []string{"outbox", "relay"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", size, dest), func(b *testing.B) { benchEmailDelivery(b, size, dest) })
		}
	}
}

func benchEmailDelivery(b *testing.B, size int, dest string) {
	kekFile := writeKEKFile(b)
	outbox := filepath.Join(b.TempDir(), "outbox.jsonl")
	var srv *smtptest.Server
	if dest == "relay" {
		srv = smtptest.Start(b, smtptest.Options{Username: "oidcd", Password: "relay-secret"})
	}
	c := testcluster.New(b, testcluster.Options{Size: size, Configure: func(_ int, cfg *node.Config) {
		cfg.RateLimit = "off"
		cfg.KEKFile = kekFile
		if srv != nil {
			cfg.SMTPURL, cfg.SMTPFrom, cfg.SMTPCAFile = "smtp://oidcd:relay-secret@"+srv.Addr(), "id@example.com", srv.CAFile
		} else {
			cfg.EmailOutbox = outbox
		}
	}})
	leader := c.WaitNewLeader()
	via := (leader + 1) % size
	applier := c.Node(via).Cluster()
	k := c.Node(via).KEK()
	m, err := email.Compose(email.PasswordReset, "en", email.Data{Site: "id.example.com", Link: "https://id.example.com/password/reset/tok3n", Expires: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	const noops = 2000
	noop := fsm.MustCommand(fsm.TypeNoop, struct{}{})
	noopTook := applyAll(b, applier, noops, func(int) fsm.Command { return noop })

	cmds := make([]fsm.Command, b.N)
	for i := range cmds {
		o, err := email.Outgoing(k, fmt.Sprintf("person%d@example.com", i), fsm.EmailPasswordReset, "en", "", m)
		if err != nil {
			b.Fatal(err)
		}
		cmds[i] = fsm.MustCommand(fsm.TypeEnqueueEmail, fsm.EnqueueEmail{Emails: []fsm.OutgoingEmail{o}, At: time.Now()})
	}
	st := c.Node(via).FSM().State()
	b.ResetTimer()
	start := time.Now()
	committed := applyAll(b, applier, b.N, func(i int) fsm.Command { return cmds[i] })
	deadline := time.Now().Add(10 * time.Minute)
	for {
		pending, err := st.PendingEmails(1)
		if err != nil {
			b.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("messages still pending after 10 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	delivered := time.Since(start)
	b.StopTimer()
	if s, err := st.EmailStats(); err != nil || s.Sent != b.N || s.Failed != 0 {
		b.Fatalf("%+v %v: want %d sent", s, err, b.N)
	}
	b.ReportMetric(noops/noopTook.Seconds(), "noop/s")
	b.ReportMetric(float64(b.N)/committed.Seconds(), "committed/s")
	b.ReportMetric(float64(b.N)/delivered.Seconds(), "delivered/s")
}
