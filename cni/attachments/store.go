// Package attachments keeps hwnet's attachment records (their format is
// package api/attachment), one file per container: enough to run every
// delegate's DEL again without the agent, the API server or the
// NetworkAttachmentDefinitions, which may all be gone by the time a pod is
// torn down. The agent and the hwnet shim share it, and its per-container
// lock serialises their operations on one container (NPWG 7.3).
package attachments

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Store keeps one record file per container, and the lock file they share,
// under a directory.
type Store struct {
	dir string
}

// NewStore returns a Store rooted at dir, which it creates on first write.
func NewStore(dir string) *Store {
	return &Store{dir: dir}
}

// Dir is the store's root.
func (s *Store) Dir() string { return s.dir }

// RecordsDir is the directory whose entries are the records.
func (s *Store) RecordsDir() string { return filepath.Join(s.dir, "containers") }

func (s *Store) recordPath(containerID string) string {
	return filepath.Join(s.RecordsDir(), containerID+".json")
}

// ValidateContainerID refuses IDs that could escape the store's directory.
func ValidateContainerID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") || len(id) > 255 {
		return fmt.Errorf("invalid CNI_CONTAINERID %q", id)
	}
	return nil
}

// ErrUnreadable marks a record that exists but cannot be decoded (a
// truncated or garbled file, or one over attachment.MaxSize). A record
// of a newer format, or of an odd shape, is read as far as it can be,
// what was left out in its Skipped.
var ErrUnreadable = errors.New("unreadable")

// Load returns the container's record, or an error wrapping os.ErrNotExist
// when hwnet holds none.
func (s *Store) Load(containerID string) (*attachment.Record, error) {
	if err := ValidateContainerID(containerID); err != nil {
		return nil, err
	}
	rec, err := attachment.Load(s.recordPath(containerID))
	if errors.Is(err, fileformat.ErrMalformed) || errors.Is(err, fileformat.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if err != nil {
		return nil, err
	}
	if rec.ContainerID != containerID {
		rec.Skipped = append(rec.Skipped, fmt.Sprintf("container ID %q, not the file's %q, which is used", rec.ContainerID, containerID))
		rec.ContainerID = containerID
	}
	return rec, nil
}

// AppendResults adds the attachments' ADD results to the saved record, as
// a second line. Appending rather than saving the record anew spares the
// file system the flush a rename over an existing file costs on ext4
// (auto_da_alloc): a third of a millisecond of every pod's start on disk.
func (s *Store) AppendResults(rec *attachment.Record) error {
	data, err := attachment.EncodeResults(rec)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.recordPath(rec.ContainerID), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("attachment record: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("attachment record %s results: %w", rec.ContainerID, err)
	}
	return nil
}

// Save writes the record atomically: a crash of the agent leaves the old
// record or the new one, never half of one. It does not fsync, which would
// cost an ADD a disk flush (1-3 ms here): the page cache outlives an agent
// crash, and a power loss takes the containers the record describes with it.
func (s *Store) Save(rec *attachment.Record) error {
	if err := ValidateContainerID(rec.ContainerID); err != nil {
		return err
	}
	data, err := attachment.Encode(rec)
	if err != nil {
		return err
	}
	path := s.recordPath(rec.ContainerID)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("attachment record: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("attachment record: %w", err)
	}
	return nil
}

// Remove forgets the container. Removing a record that does not exist is not
// an error: DEL may run more than once.
func (s *Store) Remove(containerID string) error {
	if err := ValidateContainerID(containerID); err != nil {
		return err
	}
	if err := os.Remove(s.recordPath(containerID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("attachment record: %w", err)
	}
	return nil
}

// Modified is when the container's record last changed: the end of its ADD.
func (s *Store) Modified(containerID string) (time.Time, error) {
	if err := ValidateContainerID(containerID); err != nil {
		return time.Time{}, err
	}
	fi, err := os.Stat(s.recordPath(containerID))
	if err != nil {
		return time.Time{}, fmt.Errorf("attachment record: %w", err)
	}
	return fi.ModTime(), nil
}

// Changed is when a record was last saved or removed: the records
// directory's modification time. Appending results changes no record's
// attachments and so not this time. While that time is less than
// changeGrain old, Changed is the time now: a second change within the
// kernel's tick may have kept the directory's time, so a reader that
// compares Changed with what it last read, to skip reading the records
// again, reads them again until the time settles.
func (s *Store) Changed() (time.Time, error) {
	fi, err := os.Stat(s.RecordsDir())
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("attachment records: %w", err)
	}
	if now := time.Now(); now.Sub(fi.ModTime()) < changeGrain {
		return now, nil
	}
	return fi.ModTime(), nil
}

// changeGrain is more than a file system's time granularity: the kernel
// stamps a directory with a clock that moves once a tick, so two records
// saved within a tick leave it one time.
const changeGrain = time.Second

// List returns the IDs of every container with a record.
func (s *Store) List() ([]string, error) {
	entries, err := os.ReadDir(s.RecordsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("attachment records: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(id, ".") {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Lock takes the container's exclusive lock, waiting until it is free or ctx
// ends. The returned function releases it.
//
// The lock is one byte of a lock file all containers share, at an offset
// given by a hash of the container ID, held as an open file description
// lock: it excludes other processes too (the agent and a shim running DEL
// on its own), and no file is made, or left behind, per container. Two IDs
// whose hashes collide only wait for each other.
func (s *Store) Lock(ctx context.Context, containerID string) (func(), error) {
	return s.lockContainer(ctx, containerID, true)
}

// LockIfExists is Lock without making the store's directory: where it does
// not exist, no record can be there to guard, and the error wraps
// os.ErrNotExist. A DEL without the agent takes it, so that one running
// after an uninstall does not bring the directory back.
func (s *Store) LockIfExists(ctx context.Context, containerID string) (func(), error) {
	return s.lockContainer(ctx, containerID, false)
}

func (s *Store) lockContainer(ctx context.Context, containerID string, create bool) (func(), error) {
	if err := ValidateContainerID(containerID); err != nil {
		return nil, err
	}
	unlock, err := s.lockRange(ctx, create, lockOffset(containerID), 1)
	if err != nil {
		return nil, fmt.Errorf("container %s %w", containerID, err)
	}
	return unlock, nil
}

// LockAll takes every container's lock at once, waiting until those held
// are released; it does not make the store's directory (os.ErrNotExist).
// Whoever holds it may remove the whole store: the DELs that held a
// container's lock have finished, and those waiting find no record.
func (s *Store) LockAll(ctx context.Context) (func(), error) {
	unlock, err := s.lockRange(ctx, false, 0, 0) // a length of 0 reaches every offset
	if err != nil {
		return nil, fmt.Errorf("the attachment store %w", err)
	}
	return unlock, nil
}

func (s *Store) lockRange(ctx context.Context, create bool, start, length int64) (func(), error) {
	fd, err := s.openLockFile(create)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if err := lockWait(ctx, fd, start, length); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("is busy: %w", err)
	}
	return func() { unix.Close(fd) }, nil
}

func (s *Store) openLockFile(create bool) (int, error) {
	path := filepath.Join(s.dir, "containers.lock")
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ENOENT) && create {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return -1, err
		}
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// lockOffset places a container's lock byte: any offset a file may have.
func lockOffset(containerID string) int64 {
	h := fnv.New64a()
	h.Write([]byte(containerID))
	return int64(h.Sum64() >> 2)
}

// lockWait polls a non-blocking lock: a blocking one could not be
// abandoned when ctx ends.
func lockWait(ctx context.Context, fd int, start, length int64) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: start, Len: length}
	delay := time.Millisecond
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}
