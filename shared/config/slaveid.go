package config

import "regexp"

// slaveIDRE is what a slave id may be. The id goes into Redis keys
// (crawl:{name}:s:<id>:...), ACL patterns and user names
// (redcrawl-slave-<id>), log lines and file names, so it is kept to
// characters that mean nothing in any of them.
var slaveIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// CheckSlaveID returns an *Error with the key slave.id when id is not 1 to
// 64 of A-Z a-z 0-9 _ . - (and not "." or "..", which name directories).
func CheckSlaveID(id string) error {
	if !slaveIDRE.MatchString(id) || id == "." || id == ".." {
		return errorf("slave.id", "%q must be 1 to 64 of A-Z a-z 0-9 _ . -", id)
	}
	return nil
}
