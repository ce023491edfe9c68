// The console's entry: take a sign-in fragment out of the URL first, then render.
import { render } from 'preact';
import { App } from './app.tsx';
import { takeFragmentToken } from './session.ts';
import './style.css';

takeFragmentToken();
render(<App />, document.getElementById('root') as HTMLElement);
