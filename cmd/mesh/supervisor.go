package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// process is one supervised child: the supervisor's binary run with Args.
type process struct {
	// Name names the child in logs, e.g. "agent" or "agent-2".
	Name string
	Args []string
	// Env is the child's whole environment: nothing of the supervisor's
	// own passes unless it is there. Of a name set twice, the last value
	// holds.
	Env []string
}

// supervisorConfig configures a [supervisor].
type supervisorConfig struct {
	// Binary is the program to run. Empty means this process's executable.
	Binary    string
	Processes []process
	// MinBackoff and MaxBackoff bound the pause before a restart; the pause
	// doubles at each quick death. Zero means 200ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// StableAfter is how long a child must live for its backoff to reset.
	// Zero means 10s.
	StableAfter time.Duration
	// StopTimeout is how long children get to exit after SIGTERM before they
	// are killed. Zero means 35s (a role drains within 30s).
	StopTimeout time.Duration
	// Stdout and Stderr receive the children's output. Nil means the
	// supervisor's own.
	Stdout, Stderr io.Writer
	Logger         zerolog.Logger
}

// exitConfigError is the exit code of a process that cannot run as
// configured. The supervisor does not restart such a process: it stops every
// child and returns an error, since restarting would fail the same way.
const exitConfigError = 2

// supervisor runs child processes and restarts any that dies, with backoff,
// until its context is cancelled. Children get SIGKILL when the supervisor
// dies, even by kill -9 (Linux), so no role outlives `mesh up`.
type supervisor struct {
	cfg supervisorConfig
	log zerolog.Logger

	mu   sync.Mutex
	pids map[string]int
	// copies are the goroutines moving children's output into a log file
	// (childStream).
	copies sync.WaitGroup
}

// newSupervisor validates cfg.
func newSupervisor(cfg supervisorConfig) (*supervisor, error) {
	if len(cfg.Processes) == 0 {
		return nil, errors.New("supervisor: no processes")
	}
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("supervisor: find own executable: %w", err)
		}
		cfg.Binary = exe
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	if cfg.StableAfter == 0 {
		cfg.StableAfter = 10 * time.Second
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 35 * time.Second
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	return &supervisor{cfg: cfg, log: cfg.Logger, pids: map[string]int{}}, nil
}

// kill kills the child with process id pid, if it is one of this
// supervisor's; the supervisor then starts it again. It reports whether it
// did.
func (s *supervisor) kill(pid int, reason string) bool {
	s.mu.Lock()
	name := ""
	for n, p := range s.pids {
		if p == pid {
			name = n
		}
	}
	s.mu.Unlock()
	if name == "" {
		return false
	}
	s.log.Warn().Str("process", name).Int("pid", pid).Str("reason", reason).Msg("killing for a restart")
	p, err := os.FindProcess(pid)
	return err == nil && p.Kill() == nil
}

// run starts the children and keeps them running until ctx is cancelled;
// then it stops them (SIGTERM, then SIGKILL after StopTimeout) and returns
// nil. A child exiting with [exitConfigError] stops them all and is an error.
func (s *supervisor) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, p := range s.cfg.Processes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.keep(ctx, p); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	s.waitCopies()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// keep runs p again and again until ctx ends, or p fails for good.
func (s *supervisor) keep(ctx context.Context, p process) error {
	backoff := s.cfg.MinBackoff
	log := s.log.With().Str("process", p.Name).Logger()
	for ctx.Err() == nil {
		cmd := exec.Command(s.cfg.Binary, p.Args...)
		// Never nil: exec would hand the child this process's environment.
		cmd.Env = append([]string{}, p.Env...)
		setDeathSignal(cmd)
		started := time.Now()
		outputs, err := s.childOutputs(cmd)
		if err == nil {
			err = cmd.Start()
			outputs()
		}
		if err != nil {
			log.Error().Err(err).Msg("start failed")
		} else {
			s.setPID(p.Name, cmd.Process.Pid)
			log.Info().Int("pid", cmd.Process.Pid).Msg("started")
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				s.setPID(p.Name, 0)
				if ctx.Err() != nil {
					return nil
				}
				if cmd.ProcessState.ExitCode() == exitConfigError {
					log.Error().Msg("exited with a configuration error; not restarting")
					return fmt.Errorf("%s cannot run as configured (exit code %d)", p.Name, exitConfigError)
				}
				log.Warn().Err(err).Dur("uptime", time.Since(started)).Msg("exited; restarting")
				telemetry.ProcessRestarted(p.Args[0])
			case <-ctx.Done():
				s.stop(cmd, exited, log)
				s.setPID(p.Name, 0)
				return nil
			}
		}
		if time.Since(started) >= s.cfg.StableAfter {
			backoff = s.cfg.MinBackoff
		}
		pause := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		backoff = min(backoff*2, s.cfg.MaxBackoff)
	}
	return nil
}

func (s *supervisor) stop(cmd *exec.Cmd, exited <-chan error, log zerolog.Logger) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		log.Info().Msg("stopped")
	case <-time.After(s.cfg.StopTimeout):
		log.Warn().Dur("timeout", s.cfg.StopTimeout).Msg("did not stop in time; killing")
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (s *supervisor) setPID(name string, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pid == 0 {
		delete(s.pids, name)
		return
	}
	s.pids[name] = pid
}
