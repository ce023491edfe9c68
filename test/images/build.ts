// Builds the offline test images and the template stand-ins (see test/support/images.ts):
//   node test/images/build.ts
// Needed once on a machine without a container registry, before deploying a template.
import { ensureTemplateImages, ensureTestImages } from '../support/images.ts';

const started = Date.now();
await ensureTestImages({ postgres: true });
await ensureTemplateImages();
process.stdout.write(
  `test images and template stand-ins ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
);
