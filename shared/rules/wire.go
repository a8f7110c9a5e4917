package rules

// The wire format of a rule set: how the master distributes it to the slaves
// (its files' names and raw contents) and how a slave builds the same set
// from it.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// wire is the distributed form of a Set.
type wire struct {
	Version string     `json:"version"`
	Files   []wireFile `json:"files"`
}

type wireFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// Marshal encodes the set's files for distribution (JSON: version and
// each file's name and raw contents).
func (s *Set) Marshal() ([]byte, error) {
	w := wire{Version: s.Version}
	for _, name := range s.Files {
		w.Files = append(w.Files, wireFile{Name: name, Data: s.raw[name]})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("marshal rules: %w", err)
	}
	return b, nil
}

// Unmarshal rebuilds a Set from Marshal's output, validating the files
// exactly as LoadDir does; the Version is the same as the sender's.
func Unmarshal(b []byte, opt LoadOptions) (*Set, error) {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("unmarshal rules: %w", err)
	}
	files := map[string][]byte{}
	for _, f := range w.Files {
		if f.Name != filepath.Base(f.Name) || !isRuleFile(f.Name) {
			return nil, fmt.Errorf("unmarshal rules: bad file name %q", f.Name)
		}
		if _, dup := files[f.Name]; dup {
			return nil, fmt.Errorf("unmarshal rules: file %q twice", f.Name)
		}
		files[f.Name] = f.Data
	}
	s, err := build("", files, opt)
	if err != nil {
		return nil, err
	}
	if w.Version != "" && w.Version != s.Version {
		return nil, fmt.Errorf("unmarshal rules: version %s does not match the files (%s)", w.Version, s.Version)
	}
	return s, nil
}
