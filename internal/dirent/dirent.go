// Package dirent lists directories with raw getdents(2) into a buffer the
// caller keeps, which spares os.File's fstat and fcntl calls on sysfs
// trees of thousands of directories. It is the one directory reader of
// discovery's scan and watch's PCI fingerprint.
package dirent

import (
	"bytes"
	"encoding/binary"

	"golang.org/x/sys/unix"
)

const (
	reclenOffset = 16
	nameOffset   = 19
)

// Reader lists directories; its buffer is reused, so one Reader serves one
// goroutine.
type Reader struct {
	buf [4096]byte
}

// Each calls fn with each entry name of the open directory fd, "." and
// ".." aside, as a slice of the reader's buffer valid until fn returns. An
// interrupted call is retried. Only a read of 0 bytes ends the directory:
// Linux ends a getdents call early, however much room is left, when a
// signal is pending once it wrote an entry (fs/readdir.c, filldir64), and
// Go's preemption signals arrive often on a loaded node. Taking a short
// read for the end once cost discovery all but "." and ".." of a listing.
func (r *Reader) Each(fd int, fn func(name []byte)) error {
	for {
		n, err := unix.Getdents(fd, r.buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		Walk(r.buf[:n], fn)
		if n == 0 {
			return nil
		}
	}
}

// Names lists the entry names of the open directory fd.
func (r *Reader) Names(fd int) ([]string, error) {
	var names []string
	err := r.Each(fd, func(e []byte) { names = append(names, string(e)) })
	return names, err
}

// Walk calls fn with each name in a getdents buffer, stopping at a
// malformed record.
func Walk(b []byte, fn func(name []byte)) {
	for len(b) > nameOffset {
		reclen := int(binary.NativeEndian.Uint16(b[reclenOffset:]))
		if reclen <= nameOffset || reclen > len(b) {
			return
		}
		name := b[nameOffset:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		// The kernel never gives an empty name; a buffer that does is
		// corrupt, and an empty entry would read as the directory itself.
		if len(name) > 0 && string(name) != "." && string(name) != ".." {
			fn(name)
		}
		b = b[reclen:]
	}
}
