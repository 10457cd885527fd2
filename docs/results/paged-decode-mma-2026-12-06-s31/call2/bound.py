import sys,re
src,dst,mt,mb=sys.argv[1],sys.argv[2],sys.argv[3],sys.argv[4]
s=open(src).read()
out=[];i=0
for m in re.finditer(r'\.visible \.entry (\w+)\(', s):
    close=s.index('\n)', m.start())+1
    eol=s.index('\n', close)+1
    out.append(s[i:eol]); out.append(f'.maxntid {mt}, 1, 1\n.minnctapersm {mb}\n'); i=eol
out.append(s[i:])
open(dst,'w').write(''.join(out))
