package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

var (
	mixedChaosSeed     = flag.Uint64("chaos.seed", 0, "TestChaosMixedVersions: seed of the nemesis (0: from the clock; always logged)")
	mixedChaosDuration = flag.Duration("chaos.duration", 8*time.Second, "TestChaosMixedVersions: how long faults are injected (make chaos: minutes)")
)

// TestChaosMixedVersions: three processes, node 0 of the previous release
// and nodes 1 and 2 of this tree, serve sign-ins and admin writes through
// a balancer while a nemesis (every decision from -chaos.seed) kills a
// node with SIGKILL and starts it again from the same binary, stops one
// gracefully, or freezes one with SIGSTOP for a few seconds. Throughout,
// every feature this tree adds is tried through the new nodes and must be
// refused: the release never meets a command it cannot apply, so it never
// stops, even while it is down or frozen (a member that announces nothing
// counts as the release's format). At the end every node is running,
// every acknowledged organization is on every node, and the three hold
// the same records and audit chain head. make chaos runs it for minutes
// with the seed given.
func TestChaosMixedVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two versions and starts three processes")
	}
	seed := *mixedChaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("mixed-version chaos seed %d (rerun with -chaos.seed=%d), duration %v", seed, seed, *mixedChaosDuration)
	version, oldBin := previousRelease(t)
	newBin := builtBinary(t)
	bins := [3]string{oldBin, newBin, newBin}
	u := newUpgradeCluster(t, bins, [3]string{version, "new", "new"})
	rng := rand.New(rand.NewPCG(seed, 1))

	end := time.Now().Add(*mixedChaosDuration)
	load := u.startLoad(2, end.Add(time.Minute))
	t.Cleanup(load.stop)
	counts := map[string]int{}
	restart := func(i int) {
		u.start(i, bins[i], u.labels[i])
		u.waitReady(i)
	}
	for step := 0; time.Now().Before(end) && step < 1000; step++ {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		i := rng.IntN(3)
		switch k := rng.IntN(3); k {
		case 0:
			counts["kill"]++
			u.procs[i].Process.Kill()
			u.procs[i].Wait()
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Millisecond)
			restart(i)
		case 1:
			counts["stop"]++
			if code := u.stop(i); code != 0 {
				t.Errorf("node %d (%s) exited %d on SIGTERM (seed %d)\n%s", i, u.labels[i], code, seed, u.logs())
			}
			restart(i)
		case 2:
			counts["freeze"]++
			u.procs[i].Process.Signal(syscall.SIGSTOP)
			time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
			u.procs[i].Process.Signal(syscall.SIGCONT)
		}
		for j := 1; j < 3; j++ {
			if u.ready(j) {
				u.tryFeatures(j, true, fmt.Sprintf("step %d (seed %d)", step, seed))
			}
		}
	}
	load.stop()
	for i := range 3 {
		u.waitReady(i)
	}
	t.Logf("faults %v; %d sign-ins, %d failed (faults allow it), %d organizations acknowledged", counts, load.signIns.Load(), len(load.failed), len(load.acked))
	for i, f := range load.failed {
		if i == 5 {
			t.Logf("… and %d more failed sign-ins", len(load.failed)-i)
			break
		}
		t.Logf("failed sign-in %s", f)
	}
	if load.signIns.Load() == 0 {
		t.Fatalf("no sign-in succeeded (seed %d)\n%s", seed, u.logs())
	}
	for j := 1; j < 3; j++ {
		u.tryFeatures(j, true, fmt.Sprintf("after the chaos (seed %d)", seed))
		if st, err := u.clusterStatus(j); err != nil || st.StateFormat != int(fsm.FormatBase) {
			t.Errorf("node %d: the cluster's format is %d with node 0 on %s (%v)", j, st.StateFormat, version, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(u.dir, "node0-*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "panic:") || strings.Contains(string(b), "unknown command") {
			t.Errorf("node 0 (%s) met a command it cannot apply (seed %d): %s\n%s", version, seed, filepath.Base(f), b[max(0, len(b)-3000):])
		}
	}
	for i := range 3 {
		deadline := time.Now().Add(20 * time.Second)
		for {
			missing, err := u.missingOrg(i, load.acked)
			if err == nil && missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lost the acknowledged organization %q (%v; seed %d)", i, missing, err, seed)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	u.sameState(20 * time.Second)
}
