// Package migrations holds redcrawl's MySQL schema as goose SQL migrations.
// The schema is created only by applying these (master/store.Open does it
// with a goose provider); nothing else issues DDL at run time.
//
// Add a change as a new file NNNNN_description.sql with both a
// "-- +goose Up" and a "-- +goose Down" section; never edit an applied one.
package migrations

import "embed"

// FS holds the migration files at its root, for goose.NewProvider.
//
//go:embed *.sql
var FS embed.FS
