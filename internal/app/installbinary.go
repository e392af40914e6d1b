package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// InstallBinary copies this executable to dest (mode 0555), for the init container of a
// sandbox pod: the managed-agents image has no shell to run cp with, and the user's image
// then runs `dest sandboxd` from the shared volume. The copy is written beside dest and
// renamed, so a restarted init container never leaves half a binary.
func InstallBinary(dest string) error {
	if !filepath.IsAbs(dest) {
		return fmt.Errorf("install-binary: %q is not an absolute path", dest)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install-binary: find this executable: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("install-binary: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".install-*")
	if err != nil {
		return fmt.Errorf("install-binary: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("install-binary: copy to %s: %w", dest, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fmt.Errorf("install-binary: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install-binary: %w", err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("install-binary: %w", err)
	}
	return nil
}
