package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"time"
)

// lineCopyBuffer bounds a line that copyLines keeps whole; a longer one
// (a log line is a few hundred bytes) is written in pieces.
const lineCopyBuffer = 32 << 10

// copyDrainTimeout is how long the supervisor, once its children are gone,
// waits for their last lines to reach a log file. A copy outlives its child
// only while something the child started still holds the pipe.
const copyDrainTimeout = 2 * time.Second

// childOutputs sets cmd's stdout and stderr to the supervisor's, as
// childStream gives them, and returns what to call right after cmd.Start,
// whether or not it succeeded: it closes the supervisor's copies of the
// pipes' write ends, so that a copy ends when the child has gone.
func (s *supervisor) childOutputs(cmd *exec.Cmd) (started func(), err error) {
	var ends []*os.File
	started = func() {
		for _, w := range ends {
			_ = w.Close()
		}
	}
	stream := func(dst io.Writer) (io.Writer, error) {
		w, err := s.childStream(dst)
		if err != nil || w == nil {
			return dst, err
		}
		ends = append(ends, w)
		return w, nil
	}
	if cmd.Stdout, err = stream(s.cfg.Stdout); err != nil {
		return nil, err
	}
	if s.cfg.Stderr == s.cfg.Stdout {
		cmd.Stderr = cmd.Stdout
		return started, nil
	}
	if cmd.Stderr, err = stream(s.cfg.Stderr); err != nil {
		started()
		return nil, err
	}
	return started, nil
}

// childStream returns the pipe a child writes to in place of dst, or nil
// when the child writes to dst itself. A child writing straight into a
// regular file (`mesh up > mesh.log 2>&1`) that is SIGKILLed mid-write can
// leave half a line there, since Linux ends a file write early on a fatal
// signal, and the next line of any process then runs on from it. So for a regular file the child gets a pipe instead, whose
// writes of up to 4 KiB land whole or not at all, and copyLines moves its
// lines to the file, ending a dead child's unfinished line with a newline.
// Anything else (a pipe to journald or a container runtime, a terminal) is
// the child's as it is: no copy, no extra hop for every log line.
func (s *supervisor) childStream(dst io.Writer) (*os.File, error) {
	f, ok := dst.(*os.File)
	if !ok {
		return nil, nil // exec copies it through a pipe of its own
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.copies.Add(1)
	go func() {
		defer s.copies.Done()
		copyLines(f, r)
	}()
	return w, nil
}

// copyLines copies src to dst until src ends, in writes of whole lines, so
// that lines of several copies into one file never mix; an unfinished last
// line gets a newline. Errors writing dst are dropped: a log file that
// cannot be written must not stop the child, whose pipe keeps draining.
func copyLines(dst io.Writer, src io.ReadCloser) {
	defer src.Close()
	buf := make([]byte, lineCopyBuffer)
	n := 0
	for {
		m, err := src.Read(buf[n:])
		n += m
		end := bytes.LastIndexByte(buf[:n], '\n') + 1
		if end == 0 && n == len(buf) {
			end = n // a line longer than the buffer
		}
		if end > 0 {
			_, _ = dst.Write(buf[:end])
			n = copy(buf, buf[end:n])
		}
		if err != nil {
			if n > 0 {
				buf[n] = '\n' // n < len(buf): a full buffer was written above
				_, _ = dst.Write(buf[:n+1])
			}
			return
		}
	}
}

// waitCopies waits, at most copyDrainTimeout, for every copy of a child's
// output to finish.
func (s *supervisor) waitCopies() {
	done := make(chan struct{})
	go func() {
		s.copies.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(copyDrainTimeout):
		s.log.Warn().Dur("timeout", copyDrainTimeout).Msg("children's output still open; not waiting for it")
	}
}
