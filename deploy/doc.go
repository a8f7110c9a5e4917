// Package deploy holds no code: its directory keeps the deployment files
// (systemd units, Redis and MariaDB snippets, the release packager), and
// its tests check them against systemd-analyze, redis-server, mariadbd and
// the repository's config.yaml. See docs/deploy.md.
package deploy
