# mkbounds.py IN OUT MINBLOCKS: every entry of a PTX module gets `.maxntid 128,1,1` and `.minnctapersm MINBLOCKS`.
import re, sys
s = open(sys.argv[1]).read()
n = int(sys.argv[3])
s, k = re.subn(r'(\.visible \.entry \w+\([^)]*\))[^\n]*\n\{', lambda m: m.group(1) + f'\n.maxntid 128, 1, 1\n.minnctapersm {n}\n{{', s)
assert k == 3, k
open(sys.argv[2], 'w').write(s)
