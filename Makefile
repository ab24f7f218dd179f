# `make test` is the one command that runs every test on a fresh machine.
.PHONY: test check serve

test: check
	go test -count=1 -timeout 20m ./...
	# The end-to-end HTTP suite again, on PostgreSQL (skipped when it is
	# unreachable, unless TESSERA_REQUIRE_POSTGRES=1, as in CI).
	TESSERA_TEST_STORE=postgres go test -count=1 -timeout 20m ./internal/httpapi/

# Static checks: formatting, vet, staticcheck (from the module proxy).
check:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

serve:
	go run ./cmd/tessera serve
