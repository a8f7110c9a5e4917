package frontier

import (
	"context"
	"fmt"
)

// LibraryMemory is what the library keeps between calls in Redis's Lua
// heap, as one shard's Redis sees it (lua/base.lua: keys_of, name_cache,
// sweep; bounded by luaMemory).
type LibraryMemory struct {
	// KeyTables is the crawl prefixes whose key names are kept.
	KeyTables int64
	// Names is the seen-bucket and Bloom-segment names they hold.
	Names int64
	// Settings is the parsed crawl settings kept.
	Settings int64
	// SinceSweep is the calls since the last sweep.
	SinceSweep int64
	// LuaKB is the Lua heap of all the Redis's function libraries, in KB
	// (INFO's used_memory_vm_functions, garbage included).
	LuaKB int64
	// OtherKept says whether the prefix asked about has a key table.
	OtherKept bool
}

// LibraryMemory reads what the library keeps on shard 0's Redis; other,
// when not empty, is a crawl prefix to ask about (OtherKept).
func (f *Redis) LibraryMemory(ctx context.Context, other string) (LibraryMemory, error) {
	arr, err := f.shards[0].callSlice(ctx, "memory", other)
	if err != nil {
		return LibraryMemory{}, wrap("read the library's memory", err)
	}
	if len(arr) != 6 {
		return LibraryMemory{}, fmt.Errorf("read the library's memory: %d values, not 6", len(arr))
	}
	n := make([]int64, len(arr))
	for i, v := range arr {
		if n[i], err = toInt(v); err != nil {
			return LibraryMemory{}, fmt.Errorf("read the library's memory: value %d: %w", i+1, err)
		}
	}
	return LibraryMemory{KeyTables: n[0], Names: n[1], Settings: n[2], SinceSweep: n[3], LuaKB: n[4], OtherKept: n[5] == 1}, nil
}
