# `make test` is the one command that runs every test on a fresh machine.
.PHONY: test check setup serve quick

test: setup check
	go test -count=1 -timeout 20m ./...
	# The driver replay with the cgo driver beside ncruces (replay_test.go).
	go test -count=1 -tags cgosqlite -run TestReplayIsFaithful ./internal/store/sqlite/
	# The end-to-end HTTP and MCP suites again, on PostgreSQL.
	TESSERA_TEST_STORE=postgres go test -count=1 -timeout 20m ./internal/httpapi/ ./internal/mcp/

# The inner loop: the unit and SQLite suites, with nothing but Go — no
# root, no PostgreSQL, no browser. Tests that need what only `make setup`
# provides skip, saying so (TESSERA_TEST_QUICK); -short leaves out the
# crash, load and idle-day runs. `make test` runs everything.
quick:
	TESSERA_TEST_QUICK=1 go test -short -count=1 ./...

# What the tests need beyond Go: Chromium, the MCP clients' npm packages, SeaweedFS, Jaeger,
# curl, jq, promtool, python3, gcc (for the cgo driver replay), and the
# local PostgreSQL, running.
setup:
	bash scripts/test-setup

# Static checks: formatting, vet, staticcheck (from the module proxy).
check:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	go vet ./...
	go vet -tags cgosqlite ./internal/store/sqlite/
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags cgosqlite ./internal/store/sqlite/

serve:
	go run ./cmd/tessera serve
