package cluster

import (
	"context"
)

// OnLeader registers fn to run while this node leads. fn gets a context that
// is cancelled when leadership is lost or the node stops; it should return
// promptly then. Register before leadership can be won (right after New is
// fine: the first leadership signal is delivered after registration).
func (c *Cluster) OnLeader(fn func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loops = append(c.loops, fn)
	if c.loopsReady { // already leading: start it now
		c.start(c.loopContext, fn)
	}
}

func (c *Cluster) watchLeadership() {
	defer c.observer.Done()
	ch := c.raft.LeaderCh()
	// LeaderCh only reports changes; catch a leadership won before we
	// started listening.
	if c.IsLeader() {
		c.startLoops()
	}
	for {
		select {
		case <-c.stopped:
			return
		case leader := <-ch:
			if leader {
				c.metrics.leaderChanges.Inc()
				c.startLoops()
			} else {
				c.stopLoops()
			}
		}
	}
}

// startLoops begins a leadership term: after a barrier (so the loops see
// everything committed before this node took over) it starts every
// registered loop. The barrier runs off the watcher goroutine and is
// abandoned when the term ends: raft may never answer a barrier that it
// accepted just before shutting down.
func (c *Cluster) startLoops() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.loopContext, c.loopsReady = cancel, ctx, false
	c.loopsWG.Add(1)
	go func() {
		defer c.loopsWG.Done()
		if err := c.barrier(ctx); err != nil {
			c.log.Warn("leader barrier failed; leader loops not started", "error", err)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		c.loopsReady = true
		c.log.Info("leadership acquired; starting leader loops", "loops", len(c.loops))
		for _, fn := range c.loops {
			c.start(ctx, fn)
		}
	}()
}

func (c *Cluster) barrier(ctx context.Context) error { return c.await(ctx, c.raft.Barrier(0)) }

func (c *Cluster) start(ctx context.Context, fn func(context.Context)) {
	c.loopsWG.Add(1)
	go func() {
		defer c.loopsWG.Done()
		fn(ctx)
	}()
}

func (c *Cluster) stopLoops() {
	c.mu.Lock()
	cancel := c.cancel
	c.cancel, c.loopsReady = nil, false
	c.mu.Unlock()
	if cancel != nil {
		c.log.Info("leadership lost; stopping leader loops")
		cancel()
		c.loopsWG.Wait()
	}
}
