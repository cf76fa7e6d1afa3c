package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"
)

// stateDir holds one file per live attachment, named <containerID>-<ifname>
// and holding the attachment's deviceID, so tests can prove that every ADD
// was undone. The empty stateDir keeps no state: every method succeeds.
type stateDir string

// attachmentName names an attachment's state file. skel has already
// validated both parts, so neither can hold a path separator.
func attachmentName(containerID, ifName string) string {
	return containerID + "-" + ifName
}

func (d stateDir) add(containerID, ifName, deviceID string) error {
	if d == "" {
		return nil
	}
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	path := filepath.Join(string(d), attachmentName(containerID, ifName))
	if err := os.WriteFile(path, []byte(deviceID), 0o644); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

// del removes the attachment's state; a missing one is success, as CNI
// requires DEL to be idempotent.
func (d stateDir) del(containerID, ifName string) error {
	if d == "" {
		return nil
	}
	err := os.Remove(filepath.Join(string(d), attachmentName(containerID, ifName)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

func (d stateDir) check(containerID, ifName string) error {
	if d == "" {
		return nil
	}
	path := filepath.Join(string(d), attachmentName(containerID, ifName))
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("attachment %s has no state: %w", attachmentName(containerID, ifName), err)
	}
	return nil
}

// gc removes the state of every attachment not in valid.
func (d stateDir) gc(valid []types.GCAttachment) error {
	if d == "" {
		return nil
	}
	keep := make(map[string]bool, len(valid))
	for _, a := range valid {
		keep[attachmentName(a.ContainerID, a.IfName)] = true
	}
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.Type().IsRegular() && !keep[e.Name()] {
			errs = append(errs, os.Remove(filepath.Join(string(d), e.Name())))
		}
	}
	return errors.Join(errs...)
}
