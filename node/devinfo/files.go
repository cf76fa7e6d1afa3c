package devinfo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fileSuffix ends every device plugin device information file name.
const fileSuffix = "-device.json"

// FileName is the name of the device plugin file of one device:
// <resourceName>-<deviceID>-device.json with every '/' written as '-'.
func FileName(resourceName, deviceID string) string {
	return flatten(resourceName) + "-" + flatten(deviceID) + fileSuffix
}

// CNIFileName is the name of the CNI file of one network attachment. The
// specification only asks for a name unique per attachment; this is the
// form Multus uses, <network>-<containerID>_<ifName>, with every '/'
// written as '-'.
func CNIFileName(network, containerID, ifName string) string {
	return flatten(network + "-" + containerID + "_" + ifName)
}

func flatten(s string) string { return strings.ReplaceAll(s, "/", "-") }

// Write stores the information of one device of a resource in dir (DPDir
// in production), creating dir if needed. It replaces any earlier file
// atomically, so a reader sees the old or the new content, never a part.
func Write(dir, resourceName, deviceID string, info *DeviceInfo) error {
	if err := checkNames(resourceName, deviceID); err != nil {
		return err
	}
	return WriteFile(filepath.Join(dir, FileName(resourceName, deviceID)), info)
}

// Remove deletes the file of one device of a resource in dir; a file that
// is not there is not an error.
func Remove(dir, resourceName, deviceID string) error {
	if err := checkNames(resourceName, deviceID); err != nil {
		return err
	}
	return RemoveFile(filepath.Join(dir, FileName(resourceName, deviceID)))
}

func checkNames(resourceName, deviceID string) error {
	if resourceName == "" {
		return fmt.Errorf("device info: empty resource name")
	}
	if deviceID == "" {
		return fmt.Errorf("device info: resource %s: empty device ID", resourceName)
	}
	return nil
}

// WriteFile validates info and stores it at path atomically (a temporary
// file in the same directory renamed over path), creating the directory
// with mode 0755 if needed. A file that already has the content is only
// touched (its modification time set to now), which is much cheaper; its
// age thus always says when it was last written. The CNI side passes the
// path it was given.
func WriteFile(path string, info *DeviceInfo) error {
	if info == nil {
		return fmt.Errorf("device info %s: nil information", path)
	}
	if err := info.Validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	data, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("device info %s: %w", path, err)
	}
	// A file's age tells the agent's collector whether Allocate wrote it
	// just now, before kubelet records the allocation: refresh it.
	if holds(path, data) && unix.Utimes(path, nil) == nil {
		return nil
	}
	if err := writeAtomic(path, data); err != nil {
		return fmt.Errorf("device info: %w", err)
	}
	return nil
}

// holds reports whether the file at path has exactly data. A device gets
// the same file each time it is allocated, and reading it costs a fraction
// of creating and renaming a new one.
func holds(path string, data []byte) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	buf := make([]byte, len(data)+1) // one more byte sees a longer file
	n, err := unix.Read(fd, buf)
	return err == nil && n == len(data) && string(buf[:n]) == string(data)
}

// writeAtomic writes data to a new temporary file next to path and renames
// it over path. It calls the kernel directly: Allocate writes these files
// on the critical path of pod start-up, and os.File and os.Rename would
// add an epoll registration, an fchmod and an lstat to the four system
// calls needed.
func writeAtomic(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, fd, err := createTemp(dir, base)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		tmp, fd, err = createTemp(dir, base)
	}
	if err != nil {
		return err
	}
	err = writeAndClose(fd, data)
	if err == nil {
		err = unix.Rename(tmp, path)
	}
	if err != nil {
		unix.Unlink(tmp)
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// createTemp creates a new file in dir, readable by all as the NPWG
// implementation and monitoring need not be root. The leading dot and the
// random suffix keep it out of List, which takes names ending in
// -device.json.
func createTemp(dir, base string) (string, int, error) {
	for {
		tmp := filepath.Join(dir, "."+base+"."+strconv.FormatUint(rand.Uint64(), 36))
		fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err == unix.EINTR || err == unix.EEXIST {
			continue
		}
		if err != nil {
			return "", -1, &fs.PathError{Op: "create", Path: tmp, Err: err}
		}
		return tmp, fd, nil
	}
}

func writeAndClose(fd int, data []byte) error {
	var err error
	for len(data) > 0 && err == nil {
		var n int
		n, err = unix.Write(fd, data)
		if err == unix.EINTR {
			err = nil
		}
		data = data[max(n, 0):]
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// Copy copies the information of one device of a resource in dir to the
// file at path, as a delegating CNI plugin passes the device plugin's
// information on to its delegate (device-info spec 1.1.0), and returns it.
// The bytes go over unchanged, once validated, and without the temporary
// file and rename of WriteFile: the file is new to one attachment, and its
// delegate reads it only once the copy is done.
func Copy(dir, resourceName, deviceID, path string) (*DeviceInfo, error) {
	if err := checkNames(resourceName, deviceID); err != nil {
		return nil, err
	}
	info, data, err := readFile(filepath.Join(dir, FileName(resourceName, deviceID)))
	if err != nil {
		return nil, err
	}
	if err := writeNew(path, data); err != nil {
		return nil, fmt.Errorf("device info: %w", err)
	}
	return info, nil
}

// writeNew writes data to path, creating or truncating it.
func writeNew(path string, data []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.ENOENT) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	}
	if err != nil {
		return &fs.PathError{Op: "create", Path: path, Err: err}
	}
	if err := writeAndClose(fd, data); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// ReadFile reads and validates the device information file at path.
func ReadFile(path string) (*DeviceInfo, error) {
	info, _, err := readFile(path)
	return info, err
}

func readFile(path string) (*DeviceInfo, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	info, err := Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return info, data, nil
}

// RemoveFile deletes the device information file at path; a file that is
// not there is not an error.
func RemoveFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("device info: %w", err)
	}
	return nil
}

// File is a device plugin device information file found by List.
type File struct {
	Path string
	// Resource is the resource name as the file name has it, with '-' for
	// '/': a name such as "intel.com-sriov-net" cannot be split back, as
	// both halves of a resource name may contain '-'. Use Belongs.
	Resource string
	// DeviceID is the text between the last '-' before -device.json and
	// that suffix: the whole ID for PCI addresses, which have no '-'.
	DeviceID string
}

// Belongs reports whether the file is one of resourceName's.
func (f File) Belongs(resourceName string) bool {
	return f.Resource == flatten(resourceName)
}

// List returns the device plugin files in dir, written by this or any
// other device plugin, sorted by name; a missing dir has none. The agent
// uses it to remove the files of devices no longer allocated.
func List(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("device info: %w", err)
	}
	var files []File
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if f, ok := parseFileName(e.Name()); ok {
			f.Path = filepath.Join(dir, e.Name())
			files = append(files, f)
		}
	}
	return files, nil
}

// parseFileName splits <resource>-<deviceID>-device.json.
func parseFileName(name string) (File, bool) {
	stem, ok := strings.CutSuffix(name, fileSuffix)
	if !ok || strings.HasPrefix(name, ".") {
		return File{}, false
	}
	i := strings.LastIndexByte(stem, '-')
	if i <= 0 || i == len(stem)-1 {
		return File{}, false
	}
	return File{Resource: stem[:i], DeviceID: stem[i+1:]}, true
}
