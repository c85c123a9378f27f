// Serving npm packages' ESM builds to a test page without a bundler: an import map from each
// package's "exports", and which requested file under /node_modules/ may be served.
import { readFileSync } from 'node:fs';
import path from 'node:path';

export const NODE_MODULES = path.resolve('node_modules');

// Bare specifiers -> served files, from each package's "exports" (the ESM build).
export function importMap(packages) {
  const imports = {};
  for (const name of packages) {
    const manifest = JSON.parse(readFileSync(path.join(NODE_MODULES, name, 'package.json')));
    for (const [subpath, target] of Object.entries(manifest.exports)) {
      const file = typeof target === 'string' ? target : target.import;
      if (typeof file !== 'string' || !subpath.startsWith('.')) continue;
      imports[`${name}${subpath.slice(1)}`] = `/node_modules/${name}/${file.slice(2)}`;
    }
  }
  return { imports };
}

// The file a /node_modules/... request names, or null when it is outside the served packages.
export function packageFile(pathname, packages) {
  const file = path.resolve(NODE_MODULES, pathname.slice('/node_modules/'.length));
  const served = packages.some((name) => file.startsWith(path.join(NODE_MODULES, name) + '/'));
  return served ? file : null;
}
