/** The scripted judge server lives in product code (the demo uses it); tests use it from here. */
export * from '../../src/demo/scripted-judge-server.ts';
