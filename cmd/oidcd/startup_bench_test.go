package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkExecToReady: from exec of the built binary to the first 200
// of /readyz (a leader, the first signing key, caught up), on an empty
// data directory: one node alone, and three nodes started together from
// configuration files the way the operator guide's recipe starts them (the time
// until all three are ready). "restart" is a single node started again on
// the data directory of a previous run. The floor beside them is exec to
// exit of `oidcd version`: what starting the process costs at all.
func BenchmarkExecToReady(b *testing.B) {
	bin := builtBinary(b)
	b.Run("floor=version", func(b *testing.B) {
		var times []time.Duration
		for range b.N {
			start := time.Now()
			if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
				b.Fatalf("oidcd version: %v %s", err, out)
			}
			times = append(times, time.Since(start))
		}
		reportTimes(b, times)
	})
	b.Run("nodes=1", func(b *testing.B) {
		var times []time.Duration
		for range b.N {
			times = append(times, startSingle(b, bin, b.TempDir()))
		}
		reportTimes(b, times)
	})
	b.Run("nodes=1/restart", func(b *testing.B) {
		dir := b.TempDir()
		startSingle(b, bin, dir)
		var times []time.Duration
		for range b.N {
			times = append(times, startSingle(b, bin, dir))
		}
		reportTimes(b, times)
	})
	b.Run("nodes=3", func(b *testing.B) {
		key := strings.TrimSpace(oidcd(b, bin, 0, "keygen"))
		secrets := []string{"OIDCD_CLUSTER_KEY=" + key, "OIDCD_ADMIN_TOKEN=" + strings.Repeat("s3", 24)}
		var times []time.Duration
		for range b.N {
			dir := b.TempDir()
			ports := freePorts(b, 9)
			issuer := "http://" + ports[0]
			var configs [3]string
			for i := range 3 {
				var join []string
				for j := range 3 {
					if j != i {
						join = append(join, fmt.Sprintf("%q", ports[3*j+2]))
					}
				}
				configs[i] = filepath.Join(dir, fmt.Sprintf("node%d.toml", i+1))
				text := fmt.Sprintf("issuer = %q\nhttp-addr = %q\nraft-addr = %q\ngossip-addr = %q\ndata-dir = %q\nbootstrap-expect = 3\njoin = [%s]\nshutdown-drain = \"0s\"\n",
					issuer, ports[3*i], ports[3*i+1], ports[3*i+2], filepath.Join(dir, fmt.Sprintf("data%d", i+1)), strings.Join(join, ", "))
				if err := os.WriteFile(configs[i], []byte(text), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			var procs [3]*exec.Cmd
			for i := range 3 {
				procs[i] = startNode(b, bin, configs[i], secrets, filepath.Join(dir, fmt.Sprintf("node%d.log", i+1)))
			}
			for i := range 3 {
				waitReady(b, "http://"+ports[3*i], func() string { return logs(dir) })
			}
			times = append(times, time.Since(start))
			for _, p := range procs {
				stop(b, p)
			}
		}
		reportTimes(b, times)
	})
}

// startSingle starts one node on dir, returns how long it took from exec
// to ready, and stops it.
func startSingle(b *testing.B, bin, dir string) time.Duration {
	ports := freePorts(b, 3)
	log, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, "serve", "--issuer", "http://"+ports[0], "--http-addr", ports[0], "--raft-addr", ports[1],
		"--gossip-addr", ports[2], "--data-dir", filepath.Join(dir, "data"), "--shutdown-drain", "0s")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "OIDCD_ADMIN_TOKEN=" + strings.Repeat("s1", 24)}
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	waitReady(b, "http://"+ports[0], func() string { b, _ := os.ReadFile(log.Name()); return string(b) })
	took := time.Since(start)
	if code := stop(b, cmd); code != 0 {
		b.Fatalf("exit %d", code)
	}
	return took
}

// waitReady polls /readyz every millisecond until it answers 200 (at most
// 30 s).
func waitReady(b *testing.B, base string, logs func() string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not ready within 30 s\n%s", base, logs())
		}
		time.Sleep(time.Millisecond)
	}
}

// reportTimes replaces ns/op (which would include stopping the nodes) with
// the median and the slowest start.
func reportTimes(b *testing.B, times []time.Duration) {
	slices.Sort(times)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(times[len(times)-1].Microseconds())/1000, "ms-max")
}
