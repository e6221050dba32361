"""python -m tests.container_image build|path (see __init__.py)."""
import sys

from tests import container_image


def main(argv) -> int:
    if argv[:1] == ["path"]:
        print(container_image.path())
        return 0
    if argv[:1] == ["build"]:
        why = container_image.skip_reason()
        if why:
            print(f"error: {why}", file=sys.stderr)
            return 2
        try:
            print(container_image.build(log=lambda m: print(m, file=sys.stderr, flush=True)))
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    print("usage: python -m tests.container_image build|path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
