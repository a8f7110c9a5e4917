package main

import (
	"fmt"
	"io"
)

// runACLMySQL prints the MySQL GRANTs of the master's users.
func runACLMySQL(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "master acl --mysql: not built yet")
	return 2
}
