package store

import (
	"fmt"
	"io/fs"
)

func fsSub(fsys fs.FS, dir string) (fs.FS, error) {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("open embedded %s: %w", dir, err)
	}
	return sub, nil
}
